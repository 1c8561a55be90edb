package analytics

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zone names validate the same on every host, with or without /usr/share/zoneinfo

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/querybuilder"
)

// Limits of E8/E9 bodies (API.md §8).
const (
	maxVariables = 1000
	maxPeriodN   = 100000
	maxMillis    = 253402300799999
	valueColumn  = "value.value"
)

// Resample is a parsed E8 body.
type Resample struct {
	Query     querybuilder.ResampleRequest
	Join      bool
	Precision int // -1: full precision
}

// Aggregation is a parsed E9 body.
type Aggregation struct {
	Query     querybuilder.AggregationRequest
	Precision int    // -1: full precision
	Zone      string // tz: an aggregation does not depend on it; ISO times in exports do
}

// Row is one row of a compiled resample or aggregation statement (see querybuilder).
type Row struct {
	Ord   int64    `bun:"ord"`
	TS    *int64   `bun:"ts"`
	Value *float64 `bun:"value"`
}

// Response is the body of E8 and E9.
type Response struct {
	Results any `json:"results"`
	Columns any `json:"columns"`
}

// JSONParseError is the invalid error, a sentence rather than fields, that E8 and E9
// answer for a body that is not a JSON object: HTTP renders it detail-only (spec).
func JSONParseError(reason string) error {
	msg := "JSON parse error - " + reason
	return fault.New(fault.KindInvalid, msg)
}

// common holds the fields E8 and E9 share.
type common struct {
	ids        []string
	agg        string
	zone       string
	start, end *time.Time
	join       bool
	precision  int
	signal     querybuilder.Signal
}

// ParseResample validates an E8 body for the account.
func ParseResample(body []byte, accountID int64) (*Resample, error) {
	o, err := readObject(body)
	if err != nil {
		return nil, err
	}
	c := readCommon(o)
	period, okPeriod := readPeriod(o)
	series := readSeries(o)
	if err := o.Errs.Err(); err != nil || !okPeriod {
		return nil, err
	}
	return &Resample{
		Query: querybuilder.ResampleRequest{AccountID: accountID, VariableIDs: c.ids, Aggregation: c.agg,
			Period: period, Zone: c.zone, Start: c.start, End: c.end, Signal: c.signal, Series: series},
		Join: c.join, Precision: c.precision,
	}, nil
}

// ParseAggregation validates an E9 body for the account. tz is validated as in E8
// although an aggregation without period does not depend on it.
func ParseAggregation(body []byte, accountID int64) (*Aggregation, error) {
	o, err := readObject(body)
	if err != nil {
		return nil, err
	}
	c := readCommon(o)
	if err := o.Errs.Err(); err != nil {
		return nil, err
	}
	return &Aggregation{
		Query: querybuilder.AggregationRequest{AccountID: accountID, VariableIDs: c.ids, Aggregation: c.agg,
			Join: c.join, Start: c.start, End: c.end, Signal: c.signal},
		Precision: c.precision, Zone: c.zone,
	}, nil
}

func readObject(body []byte) (*validate.Object, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, JSONParseError(fmt.Sprintf("%s at offset %d", se.Error(), se.Offset))
		}
		return nil, JSONParseError("expected a JSON object")
	}
	if raw == nil {
		return nil, JSONParseError("expected a JSON object")
	}
	return validate.NewObject(raw, fault.Fields{}, ""), nil
}

func readCommon(o *validate.Object) common {
	c := common{zone: "UTC", precision: -1}
	o.Require("variables", "aggregation")
	c.ids = readIDs(o)
	if agg, ok := o.String("aggregation", 0); ok && !querybuilder.IsResampleAggregation(agg) {
		o.Fail("aggregation", fmt.Sprintf("\"%s\" is not a valid choice. Choose one of %s.", agg, strings.Join(querybuilder.ResampleAggregations, ", ")))
	} else {
		c.agg = agg
	}
	if o.Has("tz") {
		c.zone = readZone(o)
	}
	c.start, c.end = readRange(o)
	if j, ok := o.Bool("join_dataframes"); ok {
		c.join = j
	}
	if p, ok := o.NullableInt("precision", 0, 16); ok && p != nil {
		c.precision = int(*p)
	}
	c.signal = readSignal(o)
	return c
}

func readIDs(o *validate.Object) []string {
	items, ok := o.List("variables")
	if !ok {
		return nil
	}
	if len(items) == 0 || len(items) > maxVariables {
		o.Fail("variables", fmt.Sprintf("Ensure this field has between 1 and %d elements.", maxVariables))
		return nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		if json.Unmarshal(it, &ids[i]) != nil || string(it) == "null" {
			o.Fail("variables."+strconv.Itoa(i), validate.MsgString)
		}
	}
	return ids
}

var periodRe = regexp.MustCompile(`^([1-9][0-9]{0,5})?([THD])$`)

const periodForms = "Use nT (minutes), nH (hours) or nD (days) with n from 1 to 100000 (1 may be omitted), W (weeks ending on Sunday) or M (calendar months)."

// readPeriod reads the pandas offset alias; ok is false when it is missing or invalid.
func readPeriod(o *validate.Object) (querybuilder.Period, bool) {
	if !o.Require("period") {
		return querybuilder.Period{}, false
	}
	s, ok := o.String("period", 0)
	if !ok {
		return querybuilder.Period{}, false
	}
	p, ok := ParsePeriod(s)
	if !ok {
		o.Fail("period", fmt.Sprintf("\"%s\" is not a valid period. %s", s, periodForms))
	}
	return p, ok
}

// notZones are names time.LoadLocation accepts that are not IANA zones: the server's
// own zone ("", "Local", "localtime") and a file of rules.
var notZones = map[string]bool{"": true, "Local": true, "localtime": true, "posixrules": true}

// readZone accepts exact IANA zone names only. The posix/ and right/ trees of a
// system zoneinfo directory are copies under other names (right/ with leap seconds).
func readZone(o *validate.Object) string {
	s, ok := o.String("tz", 0)
	if !ok {
		return ""
	}
	if _, ok := LoadZone(s); !ok {
		o.Fail("tz", ZoneMessage(s))
		return ""
	}
	return s
}

// LoadZone loads an exact IANA zone name (API.md §8's rules for tz).
func LoadZone(s string) (*time.Location, bool) {
	loc, err := time.LoadLocation(s)
	if err != nil || notZones[s] || strings.HasPrefix(s, "posix/") || strings.HasPrefix(s, "right/") {
		return nil, false
	}
	return loc, true
}

// ZoneMessage is the message on tz for a name LoadZone refuses.
func ZoneMessage(s string) string {
	return fmt.Sprintf("\"%s\" is not a valid time zone name of the IANA database (e.g. \"America/New_York\", \"UTC\").", s)
}

func readRange(o *validate.Object) (start, end *time.Time) {
	s, okS := o.NullableInt("start", 0, maxMillis)
	e, okE := o.NullableInt("end", 0, maxMillis)
	if okS && okE && s != nil && e != nil && *s > *e {
		o.Fail("end", "Ensure end is greater than or equal to start.")
	}
	return millis(s), millis(e)
}

func millis(ms *int64) *time.Time {
	if ms == nil {
		return nil
	}
	t := time.UnixMilli(*ms).UTC()
	return &t
}

// CheckResolved turns the statement's rows for unknown ids (NULL ts) into an invalid
// error on variables naming each of them.
func CheckResolved(rows []Row, ids []string) error {
	errs := fault.Fields{}
	for _, r := range rows {
		if r.TS == nil {
			errs.Add("variables", fmt.Sprintf("Variable '%s' was not found.", ids[r.Ord-1]))
		}
	}
	return errs.Err()
}

// Point is one (timestamp, value) of an answer; a nil Value is JSON null.
type Point struct {
	TS    int64
	Value *float64
}

// JoinedRow is one row of a joined E8 answer: a bucket label and each variable's value.
type JoinedRow struct {
	TS     int64
	Values []*float64
}

// Table is an E8 or E9 answer before its JSON shape, for the CSV exports: one series
// per requested variable (Series, in request order, newest first), or the joined
// rows (Joined, newest first); an E9 join is one series of one point over all variables.
type Table struct {
	IDs    []string
	Series [][]Point
	Wide   bool // E8 with join_dataframes: Joined holds the answer
	Joined []JoinedRow
	// AllTogether: an E9 join, one aggregate over all the variables (Series[0]).
	AllTogether bool
}

// Table builds the E8 answer from rows ordered by variable, newest first.
func (r *Resample) Table(rows []Row) Table {
	t := Table{IDs: r.Query.VariableIDs, Series: splitSeries(rows, len(r.Query.VariableIDs), r.Precision)}
	if r.Join {
		t.Wide, t.Joined = true, joinSeries(t.Series)
	}
	return t
}

// Shape builds the E8 body from rows ordered by variable, newest first.
func (r *Resample) Shape(rows []Row) Response {
	t := r.Table(rows)
	if !r.Join {
		return separate(t.Series)
	}
	joined := make([][]any, len(t.Joined))
	for i, row := range t.Joined {
		joined[i] = make([]any, 0, len(row.Values)+1)
		joined[i] = append(joined[i], row.TS)
		for _, v := range row.Values {
			joined[i] = append(joined[i], v)
		}
	}
	return Response{Results: joined, Columns: joinedColumns(r.Query.VariableIDs)}
}

// splitSeries splits rows into one series per requested variable.
func splitSeries(rows []Row, n, precision int) [][]Point {
	out := make([][]Point, n)
	for _, row := range rows {
		out[row.Ord-1] = append(out[row.Ord-1], Point{*row.TS, roundPtr(row.Value, precision)})
	}
	return out
}

// pairs is a series as JSON pairs [[ts, v], ...].
func pairs(s []Point) [][2]any {
	out := make([][2]any, len(s))
	for i, p := range s {
		out[i] = [2]any{p.TS, p.Value}
	}
	return out
}

// separate is the join_dataframes=false body: one series and one column pair each.
func separate(series [][]Point) Response {
	results := make([][][2]any, len(series))
	cols := make([][2]string, len(series))
	for i := range cols {
		results[i] = pairs(series[i])
		cols[i] = [2]string{"timestamp", valueColumn}
	}
	return Response{Results: results, Columns: cols}
}

// joinSeries outer-joins the series on their labels: one row per label, newest first,
// nil where a variable has no bucket.
func joinSeries(series [][]Point) []JoinedRow {
	byTS := map[int64]JoinedRow{}
	for i, s := range series {
		for _, p := range s {
			row, ok := byTS[p.TS]
			if !ok {
				row = JoinedRow{TS: p.TS, Values: make([]*float64, len(series))}
				byTS[p.TS] = row
			}
			row.Values[i] = p.Value
		}
	}
	rows := make([]JoinedRow, 0, len(byTS))
	for _, row := range byTS {
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].TS > rows[j].TS })
	return rows
}

func joinedColumns(ids []string) []string {
	cols := []string{"timestamp"}
	for _, id := range ids {
		cols = append(cols, id+"."+valueColumn)
	}
	return cols
}

// Table builds the E9 answer: one single-point series per variable, or for a join one
// series over all variables (empty without values).
func (a *Aggregation) Table(rows []Row) Table {
	if !a.Query.Join {
		return Table{IDs: a.Query.VariableIDs, Series: splitSeries(rows, len(a.Query.VariableIDs), a.Precision)}
	}
	all := []Point{}
	for _, row := range rows {
		all = append(all, Point{*row.TS, roundPtr(row.Value, a.Precision)})
	}
	return Table{IDs: a.Query.VariableIDs, Series: [][]Point{all}, AllTogether: true}
}

// Shape builds the E9 body: one single-pair series per variable, or for a join one
// pair over all variables ([] without values).
func (a *Aggregation) Shape(rows []Row) Response {
	t := a.Table(rows)
	if t.AllTogether {
		return Response{Results: pairs(t.Series[0]), Columns: []string{"timestamp", valueColumn}}
	}
	return separate(t.Series)
}
