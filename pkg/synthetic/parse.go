// Package synthetic holds synthetic variables (API.md §17): the expression parser, the
// dependency graph and its checks, the backfill and the live upkeep of derived values
// after writes to their inputs commit. The expressions compile to SQL in querybuilder
// (querybuilder.Synthetic), where a window function buckets exactly as E8 does, and
// the function table lives (querybuilder.Functions): the parser checks each call
// against its entry's shape, and knows no function by name.
package synthetic

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/querybuilder"
)

// The grammar, loosest binding first (docs/synthetic.md):
//
//	expr    = and { "or" and }
//	and     = not { "and" not }
//	not     = "not" not | compare
//	compare = sum [ ("<" | "<=" | ">" | ">=" | "==" | "!=") sum ]
//	sum     = product { ("+" | "-") product }
//	product = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]            (right-associative: 2^3^2 = 2^9)
//	primary = number | reference | string | call | "(" expr ")"
//	call    = name "(" [ expr { "," expr } ] ")"
//	reference = "{{" variable id | device label "." variable label "}}"
var exprLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Ref", Pattern: `\{\{[^{}]*\}\}`},
	{Name: "String", Pattern: `"[^"]*"|'[^']*'`},
	{Name: "Number", Pattern: `(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Op", Pattern: `<=|>=|==|!=|[-+*/%^<>(),]`},
	{Name: "Whitespace", Pattern: `\s+`},
})

type orExpr struct {
	Head *andExpr   `parser:"@@"`
	Tail []*andExpr `parser:"( 'or' @@ )*"`
}

type andExpr struct {
	Head *notExpr   `parser:"@@"`
	Tail []*notExpr `parser:"( 'and' @@ )*"`
}

type notExpr struct {
	Pos lexer.Position
	Not *notExpr `parser:"  'not' @@"`
	Cmp *cmpExpr `parser:"| @@"`
}

type cmpExpr struct {
	Left  *sumExpr `parser:"@@"`
	Op    string   `parser:"( @( '<' '=' | '>' '=' | '=' '=' | '!' '=' | '<=' | '>=' | '==' | '!=' | '<' | '>' )"`
	Right *sumExpr `parser:"  @@ )?"`
}

type sumExpr struct {
	Head *prodExpr  `parser:"@@"`
	Tail []*sumTail `parser:"@@*"`
}

type sumTail struct {
	Pos lexer.Position
	Op  string    `parser:"@( '+' | '-' )"`
	X   *prodExpr `parser:"@@"`
}

type prodExpr struct {
	Head *unaryExpr  `parser:"@@"`
	Tail []*prodTail `parser:"@@*"`
}

type prodTail struct {
	Pos lexer.Position
	Op  string     `parser:"@( '*' | '/' | '%' )"`
	X   *unaryExpr `parser:"@@"`
}

type unaryExpr struct {
	Pos   lexer.Position
	Op    string     `parser:"  @( '-' | '+' )"`
	X     *unaryExpr `parser:"  @@"`
	Power *powExpr   `parser:"| @@"`
}

type powExpr struct {
	Base *primary   `parser:"@@"`
	Exp  *unaryExpr `parser:"( '^' @@ )?"`
}

type primary struct {
	Pos    lexer.Position
	Number *string `parser:"  @Number"`
	Ref    *string `parser:"| @Ref"`
	String *string `parser:"| @String"`
	Call   *call   `parser:"| @@"`
	Group  *orExpr `parser:"| '(' @@ ')'"`
}

type call struct {
	Pos  lexer.Position
	Name string    `parser:"@Ident '('"`
	Args []*orExpr `parser:"( @@ ( ',' @@ )* )? ')'"`
}

var parser = participle.MustBuild[orExpr](participle.Lexer(exprLexer), participle.Elide("Whitespace"),
	participle.UseLookahead(2))

// MaxLength bounds an expression's text.
const MaxLength = 2000

// Error is a fault of an expression's text, at a position (1-based, in characters).
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("%s (at position %d)", e.Msg, e.Pos)
	}
	return e.Msg
}

// Resolver finds the variable a reference names ("<id>" or "<device>.<variable>", as
// written between the braces); ok false: unknown.
type Resolver func(ref string) (querybuilder.Ref, bool, error)

// Parse reads an expression and resolves its references. Faults of the text are
// *Error; a resolver's failure is returned as it is.
func Parse(text string, resolve Resolver) (*querybuilder.Expr, error) {
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Msg: "The expression is empty."}
	}
	if len([]rune(text)) > MaxLength {
		return nil, &Error{Msg: fmt.Sprintf("The expression is longer than %d characters.", MaxLength)}
	}
	tree, err := parser.ParseString("", text)
	if err != nil {
		var pe participle.Error
		if errors.As(err, &pe) {
			return nil, &Error{Pos: column(text, pe.Position()), Msg: "Syntax error: " + readable(pe.Message()) + "."}
		}
		return nil, &Error{Msg: "Syntax error: " + err.Error() + "."}
	}
	b := builder{text: text, resolve: resolve}
	e, err := b.or(tree)
	if err != nil {
		return nil, err
	}
	if e.IsScalar() {
		return nil, &Error{Msg: "The expression references no variable: write {{<variable id>}} or {{<device label>.<variable label>}}."}
	}
	return e, nil
}

// grammarNames are the grammar's own names in participle's messages.
var grammarNames = regexp.MustCompile(`\(expected [A-Z][A-Za-z]*\)`)

// readable rewrites participle's messages in the expression's terms.
func readable(msg string) string {
	msg = strings.ReplaceAll(msg, `token "<EOF>"`, "end of the expression")
	msg = strings.ReplaceAll(msg, "lexer: invalid input text", "unexpected text")
	return grammarNames.ReplaceAllString(msg, "(expected a number, a {{reference}}, a function call or a parenthesis)")
}

// column is a lexer position as a 1-based character position in text.
func column(text string, p lexer.Position) int {
	if p.Offset < 0 || p.Offset > len(text) {
		return p.Column
	}
	return len([]rune(text[:p.Offset])) + 1
}

type builder struct {
	text    string
	resolve Resolver
}

func (b *builder) errAt(p lexer.Position, format string, args ...any) error {
	return &Error{Pos: column(b.text, p), Msg: fmt.Sprintf(format, args...)}
}

func binary(op string, l, r *querybuilder.Expr) *querybuilder.Expr {
	return &querybuilder.Expr{Kind: querybuilder.ExprBinary, Op: op, Args: []*querybuilder.Expr{l, r}}
}

func (b *builder) or(x *orExpr) (*querybuilder.Expr, error) {
	e, err := b.and(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.and(t); err == nil {
			e = binary("or", e, r)
		}
	}
	return e, err
}

func (b *builder) and(x *andExpr) (*querybuilder.Expr, error) {
	e, err := b.not(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.not(t); err == nil {
			e = binary("and", e, r)
		}
	}
	return e, err
}

func (b *builder) not(x *notExpr) (*querybuilder.Expr, error) {
	if x.Not != nil {
		e, err := b.not(x.Not)
		if err != nil {
			return nil, err
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprUnary, Op: "not", Args: []*querybuilder.Expr{e}}, nil
	}
	l, err := b.sum(x.Cmp.Left)
	if err != nil || x.Cmp.Right == nil {
		return l, err
	}
	r, err := b.sum(x.Cmp.Right)
	if err != nil {
		return nil, err
	}
	return binary(x.Cmp.Op, l, r), nil
}

func (b *builder) sum(x *sumExpr) (*querybuilder.Expr, error) {
	e, err := b.prod(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.prod(t.X); err == nil {
			e = binary(t.Op, e, r)
		}
	}
	return e, err
}

func (b *builder) prod(x *prodExpr) (*querybuilder.Expr, error) {
	e, err := b.unary(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.unary(t.X); err == nil {
			e = binary(t.Op, e, r)
		}
	}
	return e, err
}

func (b *builder) unary(x *unaryExpr) (*querybuilder.Expr, error) {
	if x.X != nil {
		e, err := b.unary(x.X)
		if err != nil || x.Op == "+" {
			return e, err
		}
		if e.Kind == querybuilder.ExprNumber {
			e.Number = -e.Number
			return e, nil
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprUnary, Op: "-", Args: []*querybuilder.Expr{e}}, nil
	}
	base, err := b.primary(x.Power.Base, false)
	if err != nil || x.Power.Exp == nil {
		return base, err
	}
	exp, err := b.unary(x.Power.Exp)
	if err != nil {
		return nil, err
	}
	return binary("^", base, exp), nil
}

// primary reads an operand; a string is only allowed where stringOK (a window's
// period and zone, read by call).
func (b *builder) primary(x *primary, stringOK bool) (*querybuilder.Expr, error) {
	switch {
	case x.Number != nil:
		f, err := strconv.ParseFloat(*x.Number, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, b.errAt(x.Pos, "The number %s is out of range.", *x.Number)
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprNumber, Number: f}, nil
	case x.Ref != nil:
		inner := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(*x.Ref, "{{"), "}}"))
		if inner == "" {
			return nil, b.errAt(x.Pos, "Empty reference %s: write {{<variable id>}} or {{<device label>.<variable label>}}.", *x.Ref)
		}
		ref, ok, err := b.resolve(inner)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, b.errAt(x.Pos, "Unknown variable reference {{%s}}: no variable of the account has that id or device and variable label.", inner)
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprRef, Ref: ref}, nil
	case x.String != nil:
		return nil, b.errAt(x.Pos, "A string (%s) is only allowed as the period or time zone of a window function.", *x.String)
	case x.Call != nil:
		return b.call(x.Call)
	}
	return b.or(x.Group)
}

// functionNames lists the functions for error messages.
func functionNames() string {
	names := make([]string, 0, len(querybuilder.Functions))
	for n := range querybuilder.Functions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// stringArg is argument i when it is a string literal alone.
func stringArg(a *orExpr) (string, lexer.Position, bool) {
	if len(a.Tail) > 0 || len(a.Head.Tail) > 0 || a.Head.Head.Cmp == nil || a.Head.Head.Cmp.Right != nil {
		return "", lexer.Position{}, false
	}
	s := a.Head.Head.Cmp.Left
	if len(s.Tail) > 0 || len(s.Head.Tail) > 0 || s.Head.Head.Power == nil || s.Head.Head.Power.Exp != nil {
		return "", lexer.Position{}, false
	}
	p := s.Head.Head.Power.Base
	if p.String == nil {
		return "", lexer.Position{}, false
	}
	return (*p.String)[1 : len(*p.String)-1], p.Pos, true
}

// call reads a function call, checked against the shape of its entry in
// querybuilder.Functions (querybuilder.Function): no function is known here by name.
func (b *builder) call(c *call) (*querybuilder.Expr, error) {
	name := strings.ToLower(c.Name)
	f, ok := querybuilder.Functions[name]
	if !ok {
		return nil, b.errAt(c.Pos, "Unknown function %q. Functions: %s.", c.Name, functionNames())
	}
	if f.WindowForm && len(c.Args) >= 2 {
		if _, _, ok := stringArg(c.Args[1]); ok {
			f = querybuilder.WindowFunction
		}
	}
	// 1. the count of arguments (arity)
	if err := b.arity(c, name, f); err != nil {
		return nil, err
	}
	// 2. the expression arguments; a series where the function needs one
	e := &querybuilder.Expr{Kind: querybuilder.ExprCall, Op: name}
	for _, a := range c.Args[:f.Args] {
		x, err := b.or(a)
		if err != nil {
			return nil, err
		}
		e.Args = append(e.Args, x)
	}
	if f.Kind != querybuilder.FuncPointwise && e.Args[0].IsScalar() {
		return nil, b.errAt(c.Pos, "%s needs a series: its first argument must reference a variable.", name)
	}
	// 3. the constant arguments after them (windowArgs, intArg)
	extra := c.Args[f.Args:]
	switch {
	case f.Kind == querybuilder.FuncWindow:
		return e, b.windowArgs(e, c.Pos, f, extra)
	case f.Int != nil:
		n, err := b.intArg(extra[0], c.Pos, name, ordinal(f.Args+1))
		if err != nil {
			return nil, err
		}
		if n < f.Int.Min || n > f.Int.Max {
			return nil, b.errAt(c.Pos, "The %s argument of %s must be an integer from %d to %d.",
				ordinal(f.Args+1), name, f.Int.Min, f.Int.Max)
		}
		e.N = n
	}
	return e, nil
}

// arity checks the count of a call's arguments against its function's shape.
func (b *builder) arity(c *call, name string, f querybuilder.Function) error {
	n, params := len(c.Args), paramList(f.Args)
	switch {
	case f.Kind == querybuilder.FuncWindow:
		if n < f.Args+1 || n > f.Args+2 {
			return b.errAt(c.Pos, "%s(%s, \"period\"[, \"time zone\"]) takes %d or %d arguments, not %d.",
				name, params, f.Args+1, f.Args+2, n)
		}
	case f.Int != nil:
		if n != f.Args+1 {
			return b.errAt(c.Pos, "%s(%s, n) takes %d arguments, not %d.", name, params, f.Args+1, n)
		}
	case n != f.Args:
		return b.errAt(c.Pos, "%s takes %d argument(s), not %d.", name, f.Args, n)
	}
	return nil
}

// paramList names a function's n expression arguments in messages: x, y, z, x4...
func paramList(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = "x" + strconv.Itoa(i+1)
		if i < 3 {
			names[i] = []string{"x", "y", "z"}[i]
		}
	}
	return strings.Join(names, ", ")
}

// ordinal names an argument's place in messages, from 1.
func ordinal(i int) string {
	if i >= 1 && i <= 4 {
		return []string{"first", "second", "third", "fourth"}[i-1]
	}
	return strconv.Itoa(i) + "th"
}

// windowArgs reads a window function's period and optional zone (strings in quotes).
func (b *builder) windowArgs(e *querybuilder.Expr, pos lexer.Position, f querybuilder.Function, extra []*orExpr) error {
	period, at, ok := stringArg(extra[0])
	if !ok {
		return b.errAt(pos, "The %s argument of %s must be a period in quotes, e.g. \"1H\".", ordinal(f.Args+1), e.Op)
	}
	if e.Period, ok = analytics.ParsePeriod(period); !ok {
		return b.errAt(at, "\"%s\" is not a valid period. %s", period, analytics.PeriodForms)
	}
	e.Zone = "UTC"
	if len(extra) == 2 {
		zone, at, ok := stringArg(extra[1])
		if !ok || !analytics.IsZone(zone) {
			return b.errAt(at, "The %s argument of %s must be an IANA time zone name in quotes, e.g. \"Europe/Madrid\".",
				ordinal(f.Args+2), e.Op)
		}
		e.Zone = zone
	}
	return nil
}

// intArg reads a constant integer argument (the place-th).
func (b *builder) intArg(a *orExpr, pos lexer.Position, name, place string) (int, error) {
	x, err := b.or(a)
	if err != nil {
		return 0, err
	}
	if x.Kind != querybuilder.ExprNumber || x.Number != math.Trunc(x.Number) || math.Abs(x.Number) > 1e6 {
		return 0, b.errAt(pos, "The %s argument of %s must be a constant integer.", place, name)
	}
	return int(x.Number), nil
}
