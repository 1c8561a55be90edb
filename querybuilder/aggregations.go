package querybuilder

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The aggregations of the statistics endpoint (API.md §7), in canonical order.
const (
	AggFirst = "first"
	AggLast  = "last"
	AggMin   = "min"
	AggMax   = "max"
	AggCount = "count"
	AggSum   = "sum"
	AggMean  = "mean"
	AggStd   = "std"
	AggP25   = "p25"
	AggP50   = "p50"
	AggP75   = "p75"
)

// aggregation is all the compiler and the answers know of one aggregation. Adding one
// is adding an entry to aggregations (and, for E7, its result column to StatisticsRow):
// parsing, error messages, statements and answers are derived from the table. One that
// needs a summary column the tiers do not keep needs that column first (querybuilder/tiers, a
// migration, summaryColumns and rawColumns in tiers.go).
type aggregation struct {
	name string

	// E7 (Statistics) computes it by one of: summary, the columns it adds to s, the
	// aggregate of each variable's summary rows x ("expr AS column"; count adds none:
	// s always has n); spread, its output column over sd, the variables' merged spreads
	// (spreadOf); fraction, its fraction for percentile_cont over the raw values (pct).
	summary  []string
	spread   string
	fraction string
	// answer reads the E7 answer from a row: a *float64 (nil: null), rounded, or the
	// integer count; and the timestamp shown beside it (nil: none).
	answer func(r *StatisticsRow) (value any, at *time.Time)

	resample *resampleAggregation // E8/E9 (Resample, Aggregation); nil: not offered
	// signal: a time-aware aggregation (signal.go), in E7, E8 and E9 alike; E7
	// computes it by it (column name_value of tw) and does not ask it by default
	signal *signalAggregation
	v16    *v16Statistic // the v1.6 statistics route; nil: not offered
}

// resampleAggregation is an aggregation as E8 and E9 compile it: an aggregate over
// summary rows (columns n, sum, min, max), which stand for one value or one whole tile
// of values (tiers.go).
type resampleAggregation struct {
	listed int      // its place in the "Choose one of" list (API.md §8), from 1
	expr   string   // the aggregate over the summary rows of pts
	cols   []string // the summary columns a resample reads for it
	fill   string   // the value of an empty E8 bucket
	// extreme: E9 answers the timestamp of the earliest summary row reaching the value
	// (nil: of the latest value in range)
	extreme *extreme
}

// extreme is how E9 finds an extreme's timestamp in the same pass as the aggregate
// (a DISTINCT ON sorted the rows: 4x slower): first(ts, ROW(±extreme, ts)), the
// earliest row holding it; order ranks the variables' extremes for a join.
type extreme struct{ at, order string }

// v16Statistic is an aggregation as the v1.6 statistics route (API.md §6) names and
// compiles it.
type v16Statistic struct {
	name   string
	listed int    // its place in the route's "Choose one of" list, from 1
	expr   string // over summary rows x; "": the variance of their merged spreads (spreadOf)
}

// aggregations is the table, in E7's canonical order (API.md §7). Ties on min and max
// keep the earliest timestamp: rows are ordered by (extreme, its timestamp) with
// TimescaleDB's first().
var aggregations = []aggregation{
	{name: AggFirst, summary: []string{"first(x.first_value, x.first_ts) AS first_value", "min(x.first_ts) AS first_ts"},
		answer: func(r *StatisticsRow) (any, *time.Time) { return r.FirstValue, r.FirstTS }},
	{name: AggLast, summary: []string{"last(x.last_value, x.last_ts) AS last_value", "max(x.last_ts) AS last_ts"},
		answer: func(r *StatisticsRow) (any, *time.Time) { return r.LastValue, r.LastTS }},
	{name: AggMin, summary: []string{"min(x.min) AS min_value", "first(x.min_ts, ROW(x.min, x.min_ts)) AS min_ts"},
		answer: func(r *StatisticsRow) (any, *time.Time) { return r.MinValue, r.MinTS },
		resample: &resampleAggregation{listed: 2, expr: "min(min)", cols: []string{"min"}, fill: "NULL::float8",
			extreme: &extreme{at: "first(min_ts, ROW(min, min_ts))", order: "ASC"}},
		v16: &v16Statistic{name: "min", listed: 3, expr: "min(x.min)"}},
	{name: AggMax, summary: []string{"max(x.max) AS max_value", "first(x.max_ts, ROW(-x.max, x.max_ts)) AS max_ts"},
		answer: func(r *StatisticsRow) (any, *time.Time) { return r.MaxValue, r.MaxTS },
		resample: &resampleAggregation{listed: 3, expr: "max(max)", cols: []string{"max"}, fill: "NULL::float8",
			extreme: &extreme{at: "first(max_ts, ROW(-max, max_ts))", order: "DESC"}},
		v16: &v16Statistic{name: "max", listed: 4, expr: "max(x.max)"}},
	{name: AggCount, summary: []string{},
		answer:   func(r *StatisticsRow) (any, *time.Time) { return r.N, nil },
		resample: &resampleAggregation{listed: 4, expr: "sum(n)::float8", cols: []string{"n"}, fill: "0::float8"},
		v16:      &v16Statistic{name: "count", listed: 6, expr: "coalesce(sum(x.n), 0)::float8"}},
	{name: AggSum, summary: []string{"FINITE(SUM(x.sum)) AS sum_value"},
		answer:   func(r *StatisticsRow) (any, *time.Time) { return r.SumValue, nil },
		resample: &resampleAggregation{listed: 5, expr: "FINITE(SUM(sum))", cols: []string{"sum"}, fill: "0::float8"},
		v16:      &v16Statistic{name: "sum", listed: 5, expr: "FINITE(coalesce(SUM(x.sum), 0))"}},
	// finite_div: PostgreSQL's / raises where a mean of subnormals rounds to 0 (5e-324 / 3)
	{name: AggMean, summary: []string{"finite_div(SUM(x.sum), sum(x.n)) AS mean_value"},
		answer:   func(r *StatisticsRow) (any, *time.Time) { return r.MeanValue, nil },
		resample: &resampleAggregation{listed: 1, expr: "finite_div(SUM(sum), sum(n))", cols: []string{"n", "sum"}, fill: "NULL::float8"},
		v16:      &v16Statistic{name: "mean", listed: 1, expr: "finite_div(SUM(x.sum), sum(x.n))"}},
	{name: AggStd, spread: "sqrt(sd.var_value) AS std_value",
		answer: func(r *StatisticsRow) (any, *time.Time) { return r.StdValue, nil },
		v16:    &v16Statistic{name: "variance", listed: 2}},
	{name: AggP25, fraction: "0.25", answer: func(r *StatisticsRow) (any, *time.Time) { return r.P25Value, nil }},
	{name: AggP50, fraction: "0.5", answer: func(r *StatisticsRow) (any, *time.Time) { return r.P50Value, nil }},
	{name: AggP75, fraction: "0.75", answer: func(r *StatisticsRow) (any, *time.Time) { return r.P75Value, nil }},
	{name: AggTWA, signal: sigTWA, answer: func(r *StatisticsRow) (any, *time.Time) { return r.TWAValue, nil }},
	{name: AggIntegral, signal: sigIntegral, answer: func(r *StatisticsRow) (any, *time.Time) { return r.IntegralValue, nil }},
	{name: AggCoverage, signal: sigCoverage, answer: func(r *StatisticsRow) (any, *time.Time) { return r.CoverageValue, nil }},
	{name: AggIncrease, signal: sigIncrease, answer: func(r *StatisticsRow) (any, *time.Time) { return r.IncreaseValue, nil }},
}

// SumSQL is the sum of the float8 expression x over a group as IEEE arithmetic gives
// it, ±Infinity past the largest double, where PostgreSQL's sum raises "value out of
// range" (sql/20261129000001_ieee_arithmetic.up.sql): the plain sum of the terms below
// 1e290 joined with the scaled sum of the others. It costs a FILTER per row (~10 ns;
// 20% of bench-tiers case A), so the readers run it only as their fallback (ieeeSums).
func SumSQL(x string) string { return sumOver(x, "") }

// sumOver is SumSQL as a window function over the window over ("OVER (…)"; "": the
// plain aggregate).
func sumOver(x, over string) string {
	return "ieee_join(sum(" + x + ") FILTER (WHERE abs(" + x + ") < 1e290)" + over +
		", sum(ieee_down(" + x + ")) FILTER (WHERE NOT abs(" + x + ") < 1e290)" + over + ")"
}

// finite is the SQL expression x, NULL where it is not finite: sums and means past the
// largest double are answered as null (JSON has no infinities).
func finite(x string) string { return "ieee_finite(" + x + ")" }

// sums says how the table's sums are written. The table writes SUM(col) for a sum that
// may pass the largest double and FINITE(expr) for an answer that is then not finite:
// plainSums makes SUM PostgreSQL's sum, which raises "value out of range" there (what
// the readers run first: no cost per row), ieeeSums SumSQL (the readers' fallback,
// Query.IEEE; synthetic windows, which must not fail).
type sums bool

const (
	plainSums sums = false
	ieeeSums  sums = true
)

var sumMarker = regexp.MustCompile(`SUM\(([a-z_.]+)\)`)

// expand writes the table's expression expr with these sums. FINITE is ieee_finite
// with either: a tile's stored sum may be ±Infinity already (PostgreSQL adds to an
// infinity without an error).
func (s sums) expand(expr string) string {
	expr = strings.ReplaceAll(expr, "FINITE(", "ieee_finite(")
	if s == plainSums {
		return sumMarker.ReplaceAllString(expr, "sum($1)")
	}
	return sumMarker.ReplaceAllStringFunc(expr, func(m string) string { return SumSQL(sumMarker.FindStringSubmatch(m)[1]) })
}

// IEEENote is the explain note of a statement with a Query.IEEE fallback.
const IEEENote = "sums: PostgreSQL's sum(); should one pass the largest double (\"value out of range\"), the service runs the statement again with IEEE sums (ieee_join, ieee_finite), which answer it as null (docs/queries.md)"

// withIEEE compiles a statement with plain sums, and with IEEE sums as its fallback
// (Query.IEEE) when that differs.
func withIEEE(compile func(s sums) (Query, error)) (Query, error) {
	q, err := compile(plainSums)
	if err != nil {
		return Query{}, err
	}
	ieee, err := compile(ieeeSums)
	if err != nil {
		return Query{}, err
	}
	if ieee.SQL != q.SQL {
		q.IEEE = &ieee
		q.Notes = append(q.Notes, IEEENote)
	}
	return q, nil
}

// Aggregations lists E7's default aggregations in canonical order (every one but the
// time-aware ones, API.md §20).
var Aggregations = func() []string {
	var names []string
	for _, a := range aggregations {
		if a.signal == nil {
			names = append(names, a.name)
		}
	}
	return names
}()

// ResampleAggregations are E8/E9's aggregations, in the order its errors list them.
var ResampleAggregations = listed(func(a aggregation) (string, int) {
	switch {
	case a.signal != nil:
		return a.name, a.signal.listed
	case a.resample == nil:
		return "", 0
	}
	return a.name, a.resample.listed
})

// VariableStatistics are the v1.6 statistics route's aggregates, in the order its
// errors list them.
var VariableStatistics = listed(func(a aggregation) (string, int) {
	if a.v16 == nil {
		return "", 0
	}
	return a.v16.name, a.v16.listed
})

// listed is the names an endpoint offers (place > 0), in the order of their places.
func listed(place func(aggregation) (name string, at int)) []string {
	type entry struct {
		name string
		at   int
	}
	var es []entry
	for _, a := range aggregations {
		if name, at := place(a); at > 0 {
			es = append(es, entry{name, at})
		}
	}
	slices.SortStableFunc(es, func(x, y entry) int { return x.at - y.at })
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.name
	}
	return names
}

// aggregationNamed is the entry of an E7 aggregation.
func aggregationNamed(name string) (aggregation, bool) {
	i := slices.IndexFunc(aggregations, func(a aggregation) bool { return a.name == name })
	if i < 0 {
		return aggregation{}, false
	}
	return aggregations[i], true
}

// IsStatisticsAggregation tells whether name is a known statistics aggregation.
func IsStatisticsAggregation(name string) bool { _, ok := aggregationNamed(name); return ok }

// resampleAggregationNamed is the E8/E9 form of an aggregation.
func resampleAggregationNamed(name string) (*resampleAggregation, bool) {
	a, ok := aggregationNamed(name)
	return a.resample, ok && a.resample != nil
}

// IsResampleAggregation tells whether name is an E8/E9 aggregation.
func IsResampleAggregation(name string) bool {
	_, ok := resampleAggregationNamed(name)
	return ok || IsSignalAggregation(name)
}

// v16StatisticNamed is an aggregate of the v1.6 statistics route, by the route's name.
func v16StatisticNamed(name string) (*v16Statistic, bool) {
	i := slices.IndexFunc(aggregations, func(a aggregation) bool { return a.v16 != nil && a.v16.name == name })
	if i < 0 {
		return nil, false
	}
	return aggregations[i].v16, true
}

// IsVariableStatistic tells whether agg is an aggregate of the v1.6 statistics route.
func IsVariableStatistic(agg string) bool { _, ok := v16StatisticNamed(agg); return ok }

// StatisticsAnswer is aggregation name's answer in a row of the statistics statement:
// its value, a *float64 (nil: null) or the integer count, and its timestamp (nil: the
// answer has none).
func StatisticsAnswer(name string, r *StatisticsRow) (value any, at *time.Time, err error) {
	a, ok := aggregationNamed(name)
	if !ok {
		return nil, nil, fmt.Errorf("statistics answer: unknown aggregation %q", name)
	}
	value, at = a.answer(r)
	return value, at, nil
}

// StatisticsRow is one row of the statistics statement (columns as in Statistics).
// Pointers are NULL-able columns; columns of aggregations that were not requested are
// absent and stay nil.
type StatisticsRow struct {
	Ord               int64      `bun:"ord"`
	VariableID        *string    `bun:"variable_id"`
	VariableLabel     *string    `bun:"variable_label"`
	VariableName      *string    `bun:"variable_name"`
	VariableCreatedAt *time.Time `bun:"variable_created_at"`
	DeviceID          *string    `bun:"device_id"`
	DeviceLabel       *string    `bun:"device_label"`
	DeviceName        *string    `bun:"device_name"`
	DeviceCreatedAt   *time.Time `bun:"device_created_at"`
	HasData           bool       `bun:"has_data"`
	N                 int64      `bun:"n"`
	FirstValue        *float64   `bun:"first_value"`
	FirstTS           *time.Time `bun:"first_ts"`
	LastValue         *float64   `bun:"last_value"`
	LastTS            *time.Time `bun:"last_ts"`
	MinValue          *float64   `bun:"min_value"`
	MinTS             *time.Time `bun:"min_ts"`
	MaxValue          *float64   `bun:"max_value"`
	MaxTS             *time.Time `bun:"max_ts"`
	SumValue          *float64   `bun:"sum_value"`
	MeanValue         *float64   `bun:"mean_value"`
	StdValue          *float64   `bun:"std_value"`
	P25Value          *float64   `bun:"p25_value"`
	P50Value          *float64   `bun:"p50_value"`
	P75Value          *float64   `bun:"p75_value"`
	TWAValue          *float64   `bun:"twa_value"`
	IntegralValue     *float64   `bun:"integral_value"`
	CoverageValue     *float64   `bun:"coverage_value"`
	IncreaseValue     *float64   `bun:"increase_value"`
}
