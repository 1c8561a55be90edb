package querybuilder

import (
	"fmt"
	"strings"
	"sync"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Synthetic variables (API.md §17) compile here, so that a window function buckets
// exactly as E8 does (gridFor, and the aggregation table's expressions over summary
// rows). pkg/synthetic parses the expression text into an Expr.

// ExprKind is the kind of a node of a synthetic expression.
type ExprKind int

// Node kinds.
const (
	ExprNumber ExprKind = iota // Number
	ExprRef                    // Ref: a variable's values
	ExprUnary                  // Op ("-", "not") of Args[0]
	ExprBinary                 // Args[0] Op Args[1]
	ExprCall                   // Op(Args...): a pointwise, series or window function
)

// Expr is a node of a parsed, checked synthetic expression.
type Expr struct {
	Kind   ExprKind
	Op     string
	Number float64
	Ref    Ref
	Args   []*Expr
	// N is round's digits or shift's distance; Period and Zone a window's buckets.
	N      int
	Period Period
	Zone   string
}

// Ref names a variable: by its internal key (the service, which resolved it), or by
// public id or device and variable labels within Account (sensorapi compile: the
// statement resolves it).
type Ref struct {
	Key          int64
	Account      int64
	ID           string
	Device, Name string
}

// Function kinds.
const (
	FuncPointwise = iota + 1
	FuncSeries
	FuncWindow
)

// Function is an entry of the function table: its kind and the shape of its
// arguments, which pkg/synthetic's parser checks against it (a new function is its
// entry here and its compilation: pointwise, seriesFunc or window).
//
//   - Args expression arguments come first; a series or window function's first must
//     reference a variable (a series).
//   - Int is a constant integer argument after them, in Int's range (Expr.N: round's
//     digits, shift's distance); nil: none.
//   - A window function (FuncWindow) takes a period in quotes after them ("1H", Expr.Period)
//     and optionally an IANA time zone in quotes (Expr.Zone, default UTC).
//   - WindowForm: called with a string as its second argument, the function is the
//     window function of the same name (WindowFunction), whatever its own shape.
type Function struct {
	Kind       int
	Args       int
	Int        *IntRange
	WindowForm bool
}

// IntRange bounds a function's constant integer argument.
type IntRange struct{ Min, Max int }

// WindowFunction is the shape of every window function: one series, a period, a zone.
var WindowFunction = Function{Kind: FuncWindow, Args: 1}

// Functions are the functions of §17: name → kind and the shape of the arguments.
var Functions = map[string]Function{
	"abs": {Kind: FuncPointwise, Args: 1}, "sqrt": {Kind: FuncPointwise, Args: 1},
	"exp": {Kind: FuncPointwise, Args: 1}, "ln": {Kind: FuncPointwise, Args: 1},
	"log10": {Kind: FuncPointwise, Args: 1}, "floor": {Kind: FuncPointwise, Args: 1},
	"ceil": {Kind: FuncPointwise, Args: 1}, "sin": {Kind: FuncPointwise, Args: 1},
	"cos": {Kind: FuncPointwise, Args: 1}, "tan": {Kind: FuncPointwise, Args: 1},
	"round": {Kind: FuncPointwise, Args: 1, Int: &IntRange{-15, 15}},
	"min":   {Kind: FuncPointwise, Args: 2, WindowForm: true},
	"max":   {Kind: FuncPointwise, Args: 2, WindowForm: true},
	"where": {Kind: FuncPointwise, Args: 3},
	"diff":  {Kind: FuncSeries, Args: 1}, "shift": {Kind: FuncSeries, Args: 1, Int: &IntRange{1, 100000}},
	"cumsum": {Kind: FuncSeries, Args: 1},
	"mean":   WindowFunction, "sum": WindowFunction, "count": WindowFunction, "first": WindowFunction,
	"last": WindowFunction, "std": WindowFunction,
}

// IsWindow tells whether the node is a window function (min and max are when called
// with a period).
func (e *Expr) IsWindow() bool {
	return e.Kind == ExprCall && e.Period.N > 0
}

// anchored tells whether a window's buckets depend on where its argument's history
// starts: E8 counts nT, nH and nD buckets from the local midnight of the first value
// (weeks and months are calendar ones). They do not when every midnight lies on the
// grid whatever the first day: one-day buckets (local dates), and minutes or hours
// that divide a day, in UTC, which never changes its offset. Those windows are
// compiled without the origin (freeGrid), and a recompute of part of their history
// needs no look at its start.
func (e *Expr) anchored() bool {
	_, free := freeGrid(e.Period, e.Zone)
	return !free && e.Period.Unit != Week && e.Period.Unit != Month
}

// Refs lists the keys the expression reads, each once, in order of appearance.
func (e *Expr) Refs() []Ref {
	var out []Ref
	var walk func(*Expr)
	walk = func(n *Expr) {
		if n.Kind == ExprRef {
			for _, r := range out {
				if r == n.Ref {
					return
				}
			}
			out = append(out, n.Ref)
		}
		for _, a := range n.Args {
			walk(a)
		}
	}
	walk(e)
	return out
}

// IsScalar tells whether the node reads no variable (a constant).
func (e *Expr) IsScalar() bool { return len(e.Refs()) == 0 }

// AnchoredWindows lists the window-function nodes whose buckets start from their
// argument's first value, in pre-order (pkg/synthetic keeps the first timestamp of
// each one's argument: a change of it moves the bucket grid).
func (e *Expr) AnchoredWindows() []*Expr {
	var out []*Expr
	var walk func(*Expr)
	walk = func(n *Expr) {
		if n.IsWindow() && n.anchored() {
			out = append(out, n)
		}
		for _, a := range n.Args {
			walk(a)
		}
	}
	walk(e)
	return out
}

// HasPositional tells whether some node depends on other timestamps than its own
// (series and window functions): then a write before the first value may move
// everything after it.
func (e *Expr) HasPositional() bool {
	if e.Kind == ExprCall && (e.IsWindow() || Functions[e.Op].Kind == FuncSeries) {
		return true
	}
	for _, a := range e.Args {
		if a.HasPositional() {
			return true
		}
	}
	return false
}

// margin is how far a bucket of the window reaches from its label, at most: labels lie
// inside their bucket (the start for nT, nH and nD, the Sunday of a week, the last day
// of a month), and a local day lasts at most 25 hours.
func (e *Expr) margin() time.Duration {
	p := e.Period
	switch p.Unit {
	case Minute:
		return time.Duration(p.N) * time.Minute
	case Hour:
		return time.Duration(p.N) * time.Hour
	case Day:
		return time.Duration(p.N)*25*time.Hour + time.Hour
	case Week:
		return 8 * 24 * time.Hour
	}
	return 32 * 24 * time.Hour
}

// width is the width of a window's buckets when it is fixed and they lie on a grid
// of their own (minutes or hours dividing a day, in UTC: see anchored), else 0: a
// change then reaches only its own buckets, and a bucket only its own values.
func (e *Expr) width() time.Duration {
	if _, free := freeGrid(e.Period, e.Zone); !free || e.Period.Unit == Day {
		return 0
	}
	return e.margin()
}

// labelSlack widens the labels calendarLabels computes with the service's tz data: the
// statement's labels come from the database's (a midnight that a DST change skips or
// repeats, tz data of other releases), which may place them up to a DST shift away.
const labelSlack = 3 * time.Hour

// calendarLabels is, for a window of local days, weeks or months (whose grid is the
// calendar's: see anchored), the range of the labels of the buckets holding [lo, hi]
// (ms), widened by labelSlack; ok is false for the other windows and for a zone the
// service's tz data does not know.
func (e *Expr) calendarLabels(lo, hi int64) (l, h int64, ok bool) {
	p := e.Period
	loc, ok := e.calendarZone()
	if !ok {
		return 0, 0, false
	}
	slack := labelSlack.Milliseconds()
	label := func(ms int64) int64 { // the label of the bucket holding ms
		t := time.UnixMilli(ms).In(loc)
		y, m, d := t.Date()
		switch p.Unit {
		case Week: // Monday to Sunday, labelled by the Sunday
			d += 6 - (int(t.Weekday())+6)%7
		case Month: // labelled by its last day
			m, d = m+1, 0
		}
		return time.Date(y, m, d, 0, 0, 0, 0, loc).UnixMilli()
	}
	l, h = lo, hi
	if lo > -Unbounded {
		l = label(lo) - slack
	}
	if hi < Unbounded {
		h = label(hi) + slack
	}
	return l, h, true
}

// calendarZone is the zone of a window of local days, weeks or months, whose buckets
// are the calendar's (see anchored); ok is false for the other windows and for a zone
// the service's tz data does not know.
func (e *Expr) calendarZone() (loc *time.Location, ok bool) {
	p := e.Period
	if calendar := p.Unit == Day && p.N == 1 || p.Unit == Week || p.Unit == Month; !calendar {
		return nil, false
	}
	loc, err := location(e.Zone)
	return loc, err == nil
}

// calendarReach is how far before and after its label a bucket of local days, weeks
// or months holds values, at most (DST changes and labelSlack included): labels are
// the local midnight starting the day, the week's Sunday, the month's last day.
func (e *Expr) calendarReach() (before, after time.Duration) {
	const day = 24 * time.Hour
	after = day + 2*time.Hour
	switch e.Period.Unit {
	case Week:
		return 6*day + 2*time.Hour, after
	case Month:
		return 30*day + 2*time.Hour, after
	}
	return 2 * time.Hour, after
}

var locations sync.Map // zone name → *time.Location

// location is time.LoadLocation, kept: Affected runs for every write of an input.
func location(zone string) (*time.Location, error) {
	if l, ok := locations.Load(zone); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(zone)
	if err != nil {
		return nil, err
	}
	locations.Store(zone, l)
	return l, nil
}

// floorTo is the start of the w-wide bucket holding ms (unbounded ends stay).
func floorTo(ms, w int64) int64 {
	if ms <= -Unbounded || ms >= Unbounded {
		return ms
	}
	return ms - ((ms%w)+w)%w
}

// Unbounded is the end of a range that has none.
const Unbounded = int64(1) << 62

// Affected is the range of output timestamps (ms, inclusive) that a change of an
// input's values over [from, to] may alter. Series functions reach to the end (a
// value n positions later, a running sum); windows reach a bucket either side.
func (e *Expr) Affected(from, to int64) (int64, int64) {
	switch {
	case e.Kind == ExprRef || e.Kind == ExprNumber:
		return from, to
	case e.IsWindow():
		lo, hi := e.Args[0].Affected(from, to)
		if w := e.width().Milliseconds(); w > 0 { // the labels of the buckets holding [lo, hi]
			return floorTo(lo, w), floorTo(hi, w)
		}
		if l, h, ok := e.calendarLabels(lo, hi); ok {
			return l, h
		}
		m := e.margin().Milliseconds()
		return lo - m, satAdd(hi, m)
	case e.Kind == ExprCall && Functions[e.Op].Kind == FuncSeries:
		lo, _ := e.Args[0].Affected(from, to)
		return lo, Unbounded
	}
	lo, hi := Unbounded, -Unbounded
	for _, a := range e.Args {
		if a.IsScalar() {
			continue
		}
		l, h := a.Affected(from, to)
		lo, hi = min(lo, l), max(hi, h)
	}
	return lo, hi
}

func satAdd(a, b int64) int64 {
	if a >= Unbounded-b {
		return Unbounded
	}
	return a + b
}

// SyntheticRequest asks for the values of an expression: over the inputs' whole
// history (From and To nil: the backfill), or only those with timestamps in
// [From, To] (live upkeep), computed from the input values those need.
type SyntheticRequest struct {
	Expr     *Expr
	From, To *time.Time
	// Self is the synthetic variable's own key, when its stored values before From are
	// its expression's over the current inputs (the live upkeep, which recomputes from
	// the earliest change on). A running sum of a reference, cumsum({{x}}), then carries
	// on from its stored value at x's last value before From, instead of summing x's
	// whole history again (carried).
	Self int64
	// NewestFirst orders the rows by ts descending: the order of the values index
	// (variable_id, ts DESC), which an insert of many rows then fills as appends (a
	// backfill of 3.15 M values inserts in 4.4 s instead of 5.4 s).
	NewestFirst bool
}

// Synthetic compiles the expression into one statement returning (ts timestamptz,
// value float8), ordered by ts, one row per timestamp where the expression has a
// finite value.
func Synthetic(r SyntheticRequest) (Query, error) {
	if r.Expr == nil || r.Expr.IsScalar() {
		return Query{}, fmt.Errorf("synthetic: the expression reads no variable")
	}
	c := &synthCompiler{}
	if r.Self != 0 && r.Expr.Kind == ExprCall && r.Expr.Op == "cumsum" && r.Expr.Args[0].Kind == ExprRef {
		c.carry = r.Expr
		c.self = r.Self
	}
	var b span
	if r.From != nil {
		b.lo = sq.Expr("?::timestamptz", *r.From)
	}
	if r.To != nil {
		b.hi = sq.Expr("?::timestamptz", *r.To)
	}
	body, err := c.series(r.Expr, b)
	if err != nil {
		return Query{}, err
	}
	order := "ORDER BY s.ts"
	if r.NewestFirst {
		order += " DESC"
	}
	stmt := sq.ConcatExpr("SELECT s.ts, s.value\nFROM (\n", body, "\n) s\n"+order)
	return build(stmt, nil)
}

// span restricts a series to timestamps in [lo, hi] (SQL timestamptz expressions;
// nil: open).
type span struct{ lo, hi sq.Sqlizer }

// widen moves the ends out by before and after (an end that is open stays open).
func (b span) widen(before, after time.Duration) span {
	iv := func(d time.Duration) string { return fmt.Sprintf("interval '%d seconds'", int64(d/time.Second)) }
	var out span
	if b.lo != nil {
		out.lo = sq.ConcatExpr("(", b.lo, " - "+iv(before)+")")
	}
	if b.hi != nil {
		out.hi = sq.ConcatExpr("(", b.hi, " + "+iv(after)+")")
	}
	return out
}

// buckets widens the span to the w-wide buckets (time_bucket's) holding its ends.
func (b span) buckets(w time.Duration) span {
	iv := fmt.Sprintf("interval '%d seconds'", int64(w/time.Second))
	var out span
	if b.lo != nil {
		out.lo = sq.ConcatExpr("time_bucket("+iv+", ", b.lo, ")")
	}
	if b.hi != nil {
		out.hi = sq.ConcatExpr("(time_bucket("+iv+", ", b.hi, ") + "+iv+" - interval '1 microsecond')")
	}
	return out
}

// where is the predicate of the span on a ts column ("TRUE" when open).
func (b span) where(col string) sq.Sqlizer {
	var parts []any
	if b.lo != nil {
		parts = append(parts, col+" >= ", b.lo)
	}
	if b.hi != nil {
		if len(parts) > 0 {
			parts = append(parts, " AND ")
		}
		parts = append(parts, col+" <= ", b.hi)
	}
	if len(parts) == 0 {
		return sq.Expr("TRUE")
	}
	return sq.ConcatExpr(parts...)
}

// packed is the span as packed_dots' bounds (raw values are rows or packed days,
// docs/queries.md "Packed days").
func (b span) packed() sq.Sqlizer {
	lo, hi := sq.Expr("'-infinity'::timestamptz"), sq.Expr("'infinity'::timestamptz")
	if b.lo != nil {
		lo = sq.ConcatExpr(b.lo, "::timestamptz")
	}
	if b.hi != nil {
		hi = sq.ConcatExpr(b.hi, "::timestamptz")
	}
	return sq.ConcatExpr(lo, ", ", hi)
}

type synthCompiler struct {
	alias int
	carry *Expr // the running sum carried on from self's stored values (SyntheticRequest.Self)
	self  int64
}

func (c *synthCompiler) next(prefix string) string {
	c.alias++
	return fmt.Sprintf("%s%d", prefix, c.alias)
}

// series compiles a node that reads variables into a SELECT of (ts, value) over b.
// Pointwise trees become one join of their leaves (references, series and window
// functions) on ts; the expression is computed per row, and rows where it is not
// finite (NULL here: every partial operation yields NULL outside its domain) dropped.
func (c *synthCompiler) series(e *Expr, b span) (sq.Sqlizer, error) {
	switch {
	case e.Kind == ExprRef:
		// OFFSET 0 keeps the expression's filters out of this scan: pushed down, PostgreSQL
		// may evaluate one (e.g. value * 2, which raises an error on overflow) on other
		// variables' rows before the key's condition has dropped them
		return sq.ConcatExpr(`SELECT ts, value FROM "values" WHERE variable_id = `, refKey(e.Ref), ` AND `, b.where("ts"), `
UNION ALL SELECT ts, value FROM packed_dots(`, b.packed(), `) WHERE variable_id = `, refKey(e.Ref), ` OFFSET 0`), nil
	case e.IsWindow():
		return c.window(e, b)
	case e.Kind == ExprCall && Functions[e.Op].Kind == FuncSeries:
		return c.seriesFunc(e, b)
	}
	var leaves []any    // FROM items
	var checks []string // each leaf within the plain operators' range (ieeeRange)
	var first string
	seen := map[string]string{}   // references by key
	aliases := map[*Expr]string{} // leaves compiled (the guarded pass reuses them)
	var value func(n *Expr, guarded bool) (sq.Sqlizer, error)
	value = func(n *Expr, guarded bool) (sq.Sqlizer, error) {
		if n.Kind == ExprNumber {
			return sq.Expr("?::float8", n.Number), nil
		}
		if n.Kind == ExprRef || n.IsWindow() || (n.Kind == ExprCall && Functions[n.Op].Kind == FuncSeries) {
			if a, ok := aliases[n]; ok {
				return sq.Expr(a + ".value"), nil
			}
			key := ""
			if n.Kind == ExprRef {
				key = fmt.Sprintf("%+v", n.Ref)
				if a, ok := seen[key]; ok {
					aliases[n] = a
					return sq.Expr(a + ".value"), nil
				}
			}
			s, err := c.series(n, b)
			if err != nil {
				return nil, err
			}
			a := c.next("s")
			if key != "" {
				seen[key] = a
			}
			aliases[n] = a
			checks = append(checks, a+".value")
			if first == "" {
				first = a
				leaves = append(leaves, "(", s, ") "+a)
			} else {
				leaves = append(leaves, "\nJOIN (", s, ") "+a+" ON "+a+".ts = "+first+".ts")
			}
			return sq.Expr(a + ".value"), nil
		}
		args := make([]sq.Sqlizer, len(n.Args))
		for i, a := range n.Args {
			var err error
			if args[i], err = value(a, guarded); err != nil {
				return nil, err
			}
		}
		return pointwise(n, args, guarded)
	}
	v, err := c.ieee(e, &checks, value)
	if err != nil {
		return nil, err
	}
	return sq.ConcatExpr("SELECT p.ts, p.value FROM (\nSELECT "+first+".ts, ", v, " AS value\nFROM ",
		sq.ConcatExpr(leaves...), "\n) p WHERE p.value IS NOT NULL"), nil
}

// ieee is the pointwise tree e's value (compiled by value, which lists the leaves'
// columns in *checks): plain operators where they cannot raise, the guarded ones of
// sql/20261129000001_ieee_arithmetic.up.sql where they could (magnitude.go).
func (c *synthCompiler) ieee(e *Expr, checks *[]string, value func(*Expr, bool) (sq.Sqlizer, error)) (sq.Sqlizer, error) {
	plain, err := value(e, false)
	if err != nil {
		return nil, err
	}
	r, needed, ok := ieeeRange(e)
	if !needed {
		return plain, nil
	}
	guarded, err := value(e, true)
	if err != nil || !ok {
		return guarded, err
	}
	conds := make([]string, len(*checks))
	for i, col := range *checks {
		conds[i] = fmt.Sprintf("(abs(%[1]s) BETWEEN 1e-%[2]g AND 1e%[2]g OR %[1]s = 0)", col, r)
	}
	return sq.ConcatExpr("CASE WHEN "+strings.Join(conds, " AND ")+"\n  THEN ", plain, "\n  ELSE ", guarded, " END"), nil
}

// refKey is a reference's variable key: bound, or looked up within the account.
func refKey(r Ref) sq.Sqlizer {
	switch {
	case r.Key != 0:
		return sq.Expr("?::bigint", r.Key)
	case r.ID != "":
		return sq.Expr("(SELECT id FROM variables WHERE account_id = ? AND public_id = ?)", r.Account, r.ID)
	}
	return sq.Expr(`(SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
  WHERE d.account_id = ? AND d.label = ? AND v.label = ?)`, r.Account, r.Device, r.Name)
}

// exp and power are defined up to these magnitudes (PostgreSQL raises an error where
// IEEE arithmetic would give infinity or underflow).
const (
	maxLn = "709.782712893384"
	minLn = "-708.3964185322641"
)

// pointwise is the SQL of one operation on the values of its arguments. Every operand
// may be NULL (no finite value), and so is the result then; an operation outside its
// domain (division by zero, sqrt(-1), ln(0)) is NULL, never an error.
func pointwise(n *Expr, a []sq.Sqlizer, guarded bool) (sq.Sqlizer, error) {
	x := func(format string, args ...sq.Sqlizer) sq.Sqlizer {
		parts := strings.Split(format, "%")
		out := []any{}
		for i, p := range parts {
			if i > 0 {
				idx := p[0] - '0'
				out = append(out, "(", args[idx], ")")
				p = p[1:]
			}
			out = append(out, p)
		}
		return sq.ConcatExpr(out...)
	}
	switch n.Kind {
	case ExprUnary:
		if n.Op == "-" {
			return x("-%0", a[0]), nil
		}
		return x("(%0 = 0)::int::float8", a[0]), nil // not
	case ExprBinary:
		switch n.Op {
		case "+", "-", "*", "/", "%":
			return arithmetic(n.Op, a[0], a[1], guarded, x), nil
		case "^":
			return x(`CASE WHEN %0 = 0 AND %1 > 0 THEN 0::float8 WHEN %0 = 0 AND %1 = 0 THEN 1::float8
  WHEN %0 <> 0 AND (%0 > 0 OR %1 = trunc(%1)) AND %1 * ln(abs(%0)) BETWEEN `+minLn+` AND `+maxLn+` THEN power(%0, %1) END`, a[0], a[1]), nil
		case "<", "<=", ">", ">=", "!=":
			op := n.Op
			if op == "!=" {
				op = "<>"
			}
			return x("(%0 "+op+" %1)::int::float8", a[0], a[1]), nil
		case "==":
			return x("(%0 = %1)::int::float8", a[0], a[1]), nil
		case "and":
			return x("((%0 <> 0)::int * (%1 <> 0)::int)::float8", a[0], a[1]), nil
		case "or":
			return x("sign((%0 <> 0)::int + (%1 <> 0)::int)::float8", a[0], a[1]), nil
		}
	case ExprCall:
		switch n.Op {
		case "abs", "floor", "ceil", "sin", "cos", "tan":
			return x(n.Op+"(%0)", a[0]), nil
		case "sqrt":
			return x("CASE WHEN %0 >= 0 THEN sqrt(%0) END", a[0]), nil
		case "ln", "log10":
			fn := map[string]string{"ln": "ln", "log10": "log"}[n.Op]
			return x("CASE WHEN %0 > 0 THEN "+fn+"(%0) END", a[0]), nil
		case "exp":
			return x("CASE WHEN %0 <= "+maxLn+" THEN CASE WHEN %0 >= "+minLn+" THEN exp(%0) ELSE 0::float8 END END", a[0]), nil
		case "round": // half away from zero, on the shortest decimal form (as decimalPlaces)
			return x(fmt.Sprintf("round((%%0)::text::numeric, %d)::float8", n.N), a[0]), nil
		case "min":
			return x("CASE WHEN %0 <= %1 THEN %0 WHEN %0 > %1 THEN %1 END", a[0], a[1]), nil
		case "max":
			return x("CASE WHEN %0 >= %1 THEN %0 WHEN %0 < %1 THEN %1 END", a[0], a[1]), nil
		case "where":
			return x("CASE WHEN %0 IS NULL THEN NULL WHEN %0 <> 0 THEN %1 ELSE %2 END", a[0], a[1], a[2]), nil
		}
	}
	return nil, fmt.Errorf("synthetic: cannot compile %q", n.Op)
}

// arithmetic is an operator that PostgreSQL may refuse (ieee): plain, or guarded.
// % takes the sign of the divisor, as pandas and Python.
func arithmetic(op string, a, b sq.Sqlizer, guarded bool, x func(string, ...sq.Sqlizer) sq.Sqlizer) sq.Sqlizer {
	if !guarded {
		return x(map[string]string{
			"+": "%0 + %1", "-": "%0 - %1", "*": "%0 * %1", "/": "%0 / nullif(%1, 0)",
			"%": "%0 - %1 * floor(%0 / nullif(%1, 0))",
		}[op], a, b)
	}
	return x(map[string]string{
		"+": "finite_add(%0, %1)", "-": "finite_add(%0, -(%1))", "*": "finite_mul(%0, %1)", "/": "finite_div(%0, %1)",
		"%": "finite_add(%0, -finite_mul(%1, floor(finite_div(%0, %1))))",
	}[op], a, b)
}

// seriesFunc compiles diff, shift and cumsum over the argument's values in timestamp
// order. Over a span, diff and shift read the n values before it as well (a top-n on
// the argument), cumsum everything before it.
func (c *synthCompiler) seriesFunc(e *Expr, b span) (sq.Sqlizer, error) {
	n := max(e.N, 1)
	inner := span{hi: b.hi}
	if b.lo != nil && e.Op != "cumsum" {
		before, err := c.nthBefore(e.Args[0], b.lo, n)
		if err != nil {
			return nil, err
		}
		inner.lo = sq.ConcatExpr("coalesce(", before, ", '-infinity'::timestamptz)")
	}
	arg, err := c.series(e.Args[0], inner)
	if err != nil {
		return nil, err
	}
	if e == c.carry && b.lo != nil {
		if arg, err = c.carried(e.Args[0], b, arg); err != nil {
			return nil, err
		}
	}
	var v string
	switch e.Op {
	case "diff":
		v = "finite_add(w.value, -lag(w.value) OVER (ORDER BY w.ts))"
	case "shift":
		v = fmt.Sprintf("lag(w.value, %d) OVER (ORDER BY w.ts)", n)
	default:
		v = finite(sumOver("w.value", " OVER (ORDER BY w.ts ROWS UNBOUNDED PRECEDING)"))
	}
	a := c.next("f")
	return sq.ConcatExpr("SELECT "+a+".ts, "+a+".value FROM (\nSELECT w.ts, "+v+" AS value FROM (\n", arg,
		"\n) w\n) "+a+" WHERE "+a+".value IS NOT NULL AND ", b.where(a+".ts")), nil
}

// carried is the series a running sum of the reference x over b reads: x's values in
// b after one row carrying the sum so far — self's stored value at x's last value
// before b — when there is one; x's values from its first when x has values before b
// and self none there (a sum that left the doubles stores no value); whole is x over
// (-infinity, b.hi]. The carried row comes before b, so the running sum's rows in b
// take the same additions, in the same order, as over the whole history.
func (c *synthCompiler) carried(x *Expr, b span, whole sq.Sqlizer) (sq.Sqlizer, error) {
	before, err := c.nthBefore(x, b.lo, 1)
	if err != nil {
		return nil, err
	}
	self := sq.Expr("?::bigint", c.self)
	inB, err := c.series(x, b)
	if err != nil {
		return nil, err
	}
	// carry: x's last timestamp before b, and self's value there (or NULL)
	carry := sq.ConcatExpr(`WITH carry AS MATERIALIZED (
  SELECT p.ts, (SELECT v.value FROM (
      (SELECT value FROM "values" WHERE variable_id = `, self, ` AND ts = p.ts)
      UNION ALL
      (SELECT value FROM packed_dots(p.ts, p.ts) WHERE variable_id = `, self, `)) v LIMIT 1) AS value
  FROM (SELECT `, before, ` AS ts) p
)
SELECT k.ts, k.value FROM carry k WHERE k.value IS NOT NULL
UNION ALL
SELECT x.ts, x.value FROM (`, inB, `) x WHERE EXISTS (SELECT FROM carry k WHERE k.ts IS NULL OR k.value IS NOT NULL)
UNION ALL
SELECT y.ts, y.value FROM (`, whole, `) y WHERE NOT EXISTS (SELECT FROM carry k WHERE k.ts IS NULL OR k.value IS NOT NULL)`)
	return carry, nil
}

// nthBefore is a scalar subquery: the timestamp of e's n-th value before lo, counting
// back (NULL when there are fewer). For a reference it reads n values from the newest
// down in each layout (an index scan of the rows, the newest packed days), never the
// history before them; other expressions are computed up to lo and sorted.
func (c *synthCompiler) nthBefore(e *Expr, lo sq.Sqlizer, n int) (sq.Sqlizer, error) {
	end := sq.ConcatExpr("(", lo, " - interval '1 millisecond')")
	if e.Kind == ExprRef {
		k := refKey(e.Ref)
		return sq.ConcatExpr(`(SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = `, k, ` AND ts <= `, end, fmt.Sprintf(` ORDER BY ts DESC LIMIT %d)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(`, n), k, fmt.Sprintf(`, %d, `, n), end, `), `, end, `) WHERE variable_id = `, k,
			fmt.Sprintf(` ORDER BY ts DESC LIMIT %d)
) u ORDER BY u.ts DESC OFFSET %d LIMIT 1)`, n, n-1)), nil
	}
	before, err := c.series(e, span{hi: end})
	if err != nil {
		return nil, err
	}
	return sq.ConcatExpr("(SELECT q.ts FROM (", before, fmt.Sprintf(") q ORDER BY q.ts DESC OFFSET %d LIMIT 1)", n-1)), nil
}

// firstTS is a SELECT of at most one row, the first timestamp (ts) of e's values, full
// being e over its whole history. For a reference it is one index probe in each layout
// (the oldest row, the first dot of the oldest packed day), never a read of the history.
func firstTS(e *Expr, full sq.Sqlizer) sq.Sqlizer {
	if e.Kind == ExprRef {
		k := refKey(e.Ref)
		return sq.ConcatExpr(`SELECT min(u.ts) AS ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = `, k, ` ORDER BY ts LIMIT 1)
  UNION ALL
  (SELECT p.ts_base + p.ts_r[1] * INTERVAL '1 ms' FROM values_packed p WHERE p.variable_id = `, k, ` ORDER BY p.day LIMIT 1)
) u`)
	}
	return sq.ConcatExpr("SELECT q.ts FROM (", full, ") q ORDER BY q.ts LIMIT 1")
}

// SyntheticFirst compiles the statement answering the first timestamp (ts) of an
// expression's values: no row, or a NULL one, when it has none.
func SyntheticFirst(e *Expr) (Query, error) {
	c := &synthCompiler{}
	full, err := c.series(e, span{})
	if err != nil {
		return Query{}, err
	}
	return build(firstTS(e, full), nil)
}

// Window aggregates over points (ts, value, and the summary columns n, sum, min, max
// of one value each, which the E8 expressions read), for those E8 does not offer.
var windowOnly = map[string]string{
	AggFirst: "first(value, ts)",
	AggLast:  "last(value, ts)",
	AggStd:   "stddev_samp(value)",
}

// window compiles a window function: the argument's values bucketed by gridFor, as E8
// buckets them, with the origin taken from the argument's whole history (its first
// value), and one row per non-empty bucket, stamped with E8's label. Over a span, only
// the buckets labelled inside it, from the argument's values that can reach them.
func (c *synthCompiler) window(e *Expr, b span) (sq.Sqlizer, error) {
	agg, ok := windowOnly[e.Op]
	if !ok {
		ra, ok := resampleAggregationNamed(e.Op)
		if !ok {
			return nil, fmt.Errorf("synthetic: unknown window function %q", e.Op)
		}
		agg = ieeeSums.expand(ra.expr) // a recompute must not fail
	}
	full, err := c.series(e.Args[0], span{})
	if err != nil {
		return nil, err
	}
	arg := full
	if b.lo != nil || b.hi != nil {
		read := b.widen(e.margin(), e.margin())
		if w := e.width(); w > 0 {
			read = b.buckets(w)
		} else if _, ok := e.calendarZone(); ok {
			read = b.widen(e.calendarReach())
		}
		if arg, err = c.series(e.Args[0], read); err != nil {
			return nil, err
		}
	}
	g, free := freeGrid(e.Period, e.Zone)
	if !free {
		g = gridFor(e.Period, e.Zone, firstTS(e.Args[0], full))
	}
	var origin any = ""
	if g.origin != nil {
		origin = sq.Expr(",\norigin AS MATERIALIZED (\n  ?\n)", g.origin)
	}
	a := c.next("w")
	return sq.ConcatExpr("SELECT "+a+".ts, "+a+".value FROM (\nWITH pts AS (\n  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (",
		arg, ") a\n)", origin, sq.Expr("\nSELECT ? AS ts, g.value FROM (\n  SELECT ? AS key, "+agg+" AS value FROM pts GROUP BY 1\n) g\n) "+a+
			" WHERE "+a+".value IS NOT NULL AND ", g.label, g.key), b.where(a+".ts")), nil
}

// SyntheticNote is the explain note of a synthetic statement.
const SyntheticNote = "synthetic: computed from the raw values of its inputs (API.md §17)"
