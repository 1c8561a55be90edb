package querybuilder

import (
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// Time-aware aggregations (API.md §20) read a variable's values as a signal: defined
// between consecutive values (over the whole history, so the value before start and
// the one after end shape the edges), held (locf) or interpolated (linear), undefined
// across an interval longer than max_gap. Every interval is one row of a window over
// the points (lead()), clipped to the range and, for E8, split at bucket edges; all
// durations are differences of integer milliseconds.

// The time-aware aggregations.
const (
	AggTWA      = "twa"
	AggIntegral = "integral"
	AggCoverage = "coverage"
	AggIncrease = "increase"
)

// Signal is how the time-aware aggregations read the values: Linear interpolates
// between consecutive values (else each holds until the next), MaxGap (seconds, 0:
// none) makes a longer interval a gap.
type Signal struct {
	Linear bool
	MaxGap float64
}

// signalAggregation is a time-aware aggregation: an expression over the measures of a
// bucket (or of the range): cov, the milliseconds where the signal is defined (bigint);
// area, ∫ signal dt in value·ms; inc, the sum of the counter's contributions; nv, the
// values it holds.
type signalAggregation struct {
	listed int    // its place in E8/E9's "Choose one of" list
	expr   string // over cov, area, inc, nv
	fill   string // the value of an empty E8 bucket
	// byValue: a bucket is non-empty where it holds a value (increase), else where
	// the signal is defined in it (cov > 0); and it keeps E8's grid
	byValue bool
}

var (
	sigTWA      = &signalAggregation{listed: 6, expr: "FINITE(area / nullif(cov, 0))", fill: "NULL::float8"}
	sigIntegral = &signalAggregation{listed: 7, expr: "FINITE(CASE WHEN cov > 0 THEN area / 1000 END)", fill: "NULL::float8"}
	sigCoverage = &signalAggregation{listed: 8, expr: "coalesce(cov, 0)::float8 / 1000", fill: "0::float8"}
	sigIncrease = &signalAggregation{listed: 9, expr: "FINITE(CASE WHEN nv > 0 THEN coalesce(inc, 0) END)", fill: "NULL::float8", byValue: true}
)

// signalAggregationNamed is the time-aware form of an aggregation (nil: not one).
func signalAggregationNamed(name string) *signalAggregation {
	a, ok := aggregationNamed(name)
	if !ok {
		return nil
	}
	return a.signal
}

// IsSignalAggregation tells whether name is a time-aware aggregation.
func IsSignalAggregation(name string) bool { return signalAggregationNamed(name) != nil }

// signalRange is a request's range as the signal reads it (nil: not given).
type signalRange struct {
	start, end *time.Time
}

// lo is the range's first instant per point row p: start, or without it the first
// value in range of p's variable (the signal is undefined before it anyway; without
// any range, the oldest of the last 100 values).
func (r signalRange) lo() sq.Sqlizer {
	if r.start != nil {
		return sq.Expr("?::timestamptz", *r.start)
	}
	return sq.Expr("min(p.ts) FILTER (WHERE p.inr) OVER (PARTITION BY p.variable_id)")
}

// hi is the range's last instant: end, now() with only start, else unbounded (the
// signal ends at the last value).
func (r signalRange) hi() sq.Sqlizer {
	switch {
	case r.end != nil:
		return sq.Expr("?::timestamptz", *r.end)
	case r.start != nil:
		return sq.Expr("now()")
	}
	return sq.Expr("'infinity'::timestamptz")
}

// signalPoints are the rows (variable_id, ts, value, inr) the signal needs of the
// variables keyed by ids (SQL selecting a column id): the values in range (inr) from
// both layouts, and the value just before the range and the one just after it
// (index probes, both layouts). Without a range: each variable's last 100 values
// and the one before them.
func signalPoints(ids string, r signalRange) sq.Sqlizer {
	key := "ANY (ARRAY(" + ids + "))"
	if r.start == nil && r.end == nil {
		return sq.Expr(`    SELECT p.variable_id, p.ts, p.value, row_number() OVER (PARTITION BY p.variable_id ORDER BY p.ts DESC) <= 100 AS inr
    FROM (SELECT DISTINCT id FROM (` + ids + `) i) v
    CROSS JOIN LATERAL (
      SELECT * FROM (
        (SELECT variable_id, ts, value FROM "values" WHERE variable_id = v.id ORDER BY ts DESC LIMIT 101)
        UNION ALL
        SELECT variable_id, ts, value
        FROM packed_dots(packed_newest_day(v.id, 101, 'infinity'), 'infinity') WHERE variable_id = v.id
      ) both_layouts
      ORDER BY ts DESC
      LIMIT 101
    ) p`)
	}
	inside := inRange("x.ts", r.start, r.end)
	parts := []any{`    SELECT x.variable_id, x.ts, x.value, true AS inr
    FROM "values" x
    WHERE x.variable_id = ` + key + ` AND `, inside, `
    UNION ALL
    SELECT x.variable_id, x.ts, x.value, true AS inr
    FROM packed_dots(`, packedRange(r.start, r.end), `) x
    WHERE x.variable_id = ` + key + ` AND `, inside, `
    UNION ALL
    SELECT e.*
    `}
	return sq.ConcatExpr(append(parts, edgePoints(ids, r))...)
}

// edgePoints is the FROM clause of e, the value just before the range and the one just
// after it of each variable keyed by ids (columns variable_id, ts, value, inr false).
func edgePoints(ids string, r signalRange) sq.Sqlizer {
	parts := []any{`FROM (SELECT DISTINCT id FROM (` + ids + `) i) v
    CROSS JOIN LATERAL (`}
	if r.start != nil {
		parts = append(parts, "\n      ", beforePoint("v.id", *r.start))
		parts = append(parts, "\n      UNION ALL")
	}
	return sq.ConcatExpr(append(parts, "\n      ", afterPoint("v.id", packedLast(r.end)), "\n    ) e")...)
}

// beforePoint is the latest value of variable key before start (columns variable_id,
// ts, value, inr false), from either layout: the rows' index backwards, and the two
// newest packed days up to start (the newest may hold only later dots).
func beforePoint(key string, start time.Time) sq.Sqlizer {
	last := start.Add(-time.Microsecond)
	return sq.Expr(`(SELECT * FROM (
        (SELECT variable_id, ts, value, false AS inr FROM "values" WHERE variable_id = `+key+` AND ts < ? ORDER BY ts DESC LIMIT 1)
        UNION ALL
        (SELECT variable_id, ts, value, false AS inr
         FROM packed_dots(packed_newest_day(`+key+`, 1, ?::timestamptz), ?::timestamptz) WHERE variable_id = `+key+`
         ORDER BY ts DESC LIMIT 1)
      ) b ORDER BY ts DESC LIMIT 1)`, start, last, last)
}

// afterPoint is the earliest value of variable key after end (SQL), from either
// layout: the rows' index forwards, and the two first packed days from end's. The last
// instant of those days is a LATERAL column, not a sub-select argument: with one,
// PostgreSQL does not inline packed_dots and unpacks every variable's days.
func afterPoint(key string, end sq.Sqlizer) sq.Sqlizer {
	return sq.ConcatExpr(`(SELECT * FROM (
        (SELECT variable_id, ts, value, false AS inr FROM "values" WHERE variable_id = `+key+` AND ts > `, end, ` ORDER BY ts LIMIT 1)
        UNION ALL
        (SELECT x.variable_id, x.ts, x.value, false AS inr
         FROM (SELECT max(day) + interval '1 day' - interval '1 microsecond' AS last
               FROM (SELECT day FROM values_packed WHERE variable_id = `+key+` AND day >= time_bucket(interval '1 day', `, end, `)
                     ORDER BY day LIMIT 2) d) b
         CROSS JOIN LATERAL packed_dots(`, end, ` + interval '1 microsecond', b.last) x
         WHERE x.variable_id = `+key+`
         ORDER BY x.ts LIMIT 1)
      ) a ORDER BY ts LIMIT 1)`)
}

// signalCTEs are sig, every point with its neighbours (lag, lead) and its interval
// clipped to the range [l, r) (none after the last value: least() would skip its
// NULL lead), and iv, the intervals where the signal is defined
// (positive length, not a gap) in epoch ms: [lm, rm) of [t, t1] from v to v1. Without
// intervals (E8's increase) iv is left out: a second reference to sig would make
// PostgreSQL materialize it. Over pieces (the tile path) a row is a piece: its interval
// runs from its last dot (lt, v) to the next piece's first, pv is the previous piece's
// last value, and fv, n, a0, inc0 are its first value and inside.
func signalCTEs(src string, r signalRange, s Signal, intervals, pieces bool) sq.Sqlizer {
	from, cols := "ts", "p.ts, p.value AS v, p.inr,\n           lag(p.value) OVER w AS pv"
	if pieces {
		from, cols = "lt", "p.ts, p.lt, p.value AS fv, p.lv AS v, p.inr, p.n, p.a0, p.inc0,\n           lag(p.lv) OVER w AS pv"
	}
	var gap any = ""
	if s.MaxGap > 0 {
		gap = sq.Expr("\n    AND ("+epochMillis("s.ts1")+" - "+epochMillis("s."+from)+")::float8 <= ?::float8", s.MaxGap*1000)
	}
	var iv sq.Sqlizer = sq.ConcatExpr(`,
iv AS (
  SELECT s.variable_id, s.l, s.r, `+epochMillis("s.l")+` AS lm, `+epochMillis("s.r")+` AS rm,
         `+epochMillis("s."+from)+` AS t, s.v, `+epochMillis("s.ts1")+` AS t1, s.v1
  FROM sig s
  WHERE s.r > s.l`, gap, `
)`)
	if !intervals {
		iv = sq.Expr("")
	}
	return sq.ConcatExpr(`,
sig AS (
  SELECT w.*, greatest(w.`+from+`, w.lo) AS l, CASE WHEN w.ts1 IS NOT NULL THEN least(w.ts1, w.hi) END AS r
  FROM (
    SELECT p.variable_id, `+cols+`, lead(p.ts) OVER w AS ts1, lead(p.value) OVER w AS v1,
           `, r.lo(), ` AS lo, `, r.hi(), ` AS hi
    FROM `+src+` p
    WINDOW w AS (PARTITION BY p.variable_id ORDER BY p.ts)
  ) w
)`, iv)
}

// area is ∫ signal dt in value·ms over [a, b] (SQL, epoch ms) inside the interval
// of row q: the value held, or the mean of the line's ends. With IEEE sums (the
// fallback where float8 arithmetic overflowed) it is computed exactly in numeric and
// rounded by ieee_of, ±Infinity past the largest double.
func area(s Signal, a, b string, m sums) string {
	v, v1, f := "q.v", "q.v1", "::float8"
	if m == ieeeSums {
		v, v1, f = "q.v::text::numeric", "q.v1::text::numeric", ""
	}
	out := v + " * (" + b + " - " + a + ")"
	if s.Linear {
		at := func(x string) string {
			return "(" + v + " + (" + v1 + " - " + v + ") * (" + x + " - q.t) / (q.t1 - q.t)" + f + ")"
		}
		out = "(" + at(a) + " + " + at(b) + ") / 2 * (" + b + " - " + a + ")"
	}
	if m == ieeeSums {
		return "ieee_of(" + out + ")"
	}
	return out
}

// increase is a point's contribution to a counter's increase: v − previous, or v
// after a restart; none for the first value of the history. Over pieces, a piece's:
// its first value's, and its inside's.
func increase(m sums, pieces bool) string {
	v, inside := "v", ""
	if pieces {
		v, inside = "fv", "inc0 + "
	}
	if m == ieeeSums {
		return inside + "CASE WHEN pv IS NULL THEN 0 WHEN " + v + " >= pv THEN ieee_add(" + v + ", -pv) ELSE " + v + " END"
	}
	return inside + "CASE WHEN pv IS NULL THEN 0 WHEN " + v + " >= pv THEN " + v + " - pv ELSE " + v + " END"
}

// signalMeasures is tw, the measures of each variable over the whole range (E7, E9):
// cov, area, inc, nv and the latest value's timestamp in range (last_ts). A piece adds
// its inside.
func signalMeasures(s Signal, m sums, pieces bool) string {
	point := "0, NULL, " + increase(m, false) + ", 1, ts"
	if pieces {
		point = epochMillis("lt") + " - " + epochMillis("ts") + ", a0, " + increase(m, true) + ", n, lt"
	}
	return `,
tw AS (
  SELECT variable_id, coalesce(sum(cov), 0) AS cov, ` + m.expand("SUM(area)") + ` AS area, ` + m.expand("SUM(inc)") + ` AS inc,
         sum(nv) AS nv, max(last_ts) AS last_ts
  FROM (
    SELECT q.variable_id, q.rm - q.lm AS cov, ` + area(s, "q.lm", "q.rm", m) + ` AS area,
           NULL::float8 AS inc, 0 AS nv, NULL::timestamptz AS last_ts
    FROM iv q
    UNION ALL
    SELECT variable_id, ` + point + `
    FROM sig
    WHERE inr
  ) u
  GROUP BY variable_id
)`
}

// signalAggregationOf compiles an E9 request for a time-aware aggregation: the range is
// the one bucket; the timestamp is the latest value's in range, or start.
func signalAggregationOf(r AggregationRequest, agg *signalAggregation, m sums) (Query, error) {
	at := "last_ts"
	var args []any
	if r.Start != nil {
		at, args = "coalesce(last_ts, ?::timestamptz)", []any{*r.Start}
	}
	expr := m.expand(agg.expr)
	result := sq.Expr(`SELECT vars.ord, `+at+` AS ts, `+expr+` AS value
  FROM tw JOIN vars ON vars.id = tw.variable_id
  WHERE cov > 0 OR nv > 0`, args...)
	if r.Join {
		result = sq.Expr(`SELECT 0 AS ord, `+at+` AS ts, `+expr+` AS value
  FROM (SELECT sum(cov) AS cov, `+m.expand("SUM(area)")+` AS area, `+m.expand("SUM(inc)")+` AS inc, sum(nv) AS nv, max(last_ts) AS last_ts
        FROM tw WHERE cov > 0 OR nv > 0) j
  WHERE cov > 0 OR nv > 0`, args...)
	}
	rng := signalRange{r.Start, r.End}
	c := signalCover(rng, len(tiers.All), r.TierBounds)
	src, pieces := signalSource("SELECT id FROM vars", rng, r.Signal, c, false)
	stmt := sq.ConcatExpr(sources(r.AccountID, r.VariableIDs, src),
		signalCTEs("pts", rng, r.Signal, true, pieces), signalMeasures(r.Signal, m, pieces), `,
result AS (
  `, result, `
)
`+unknownIDs+`
UNION ALL
SELECT ord, `+epochMillis("ts")+`, value FROM result
ORDER BY 1, 2 NULLS FIRST`)
	return build(stmt, signalNoteOf(r.Signal, c))
}

// signalNote is the explain note of a time-aware statement.
func signalNote(s Signal) string {
	method := "locf (each value holds until the next)"
	if s.Linear {
		method = "linear (a straight line between consecutive values)"
	}
	gap := "no max_gap"
	if s.MaxGap > 0 {
		gap = fmt.Sprintf("intervals longer than %g s are gaps", s.MaxGap)
	}
	return "time-aware: raw values (rows and packed days) in range, and the value before and after it; signal " + method + "; " + gap
}

// signalResample compiles an E8 request for a time-aware aggregation. For twa,
// integral and coverage the grid starts at local midnight of start's day (the signal
// may be defined at start before the first value in range); increase keeps E8's.
func signalResample(r ResampleRequest, agg *signalAggregation, m sums) (Query, error) {
	rng := signalRange{r.Start, r.End}
	first := sq.Expr("SELECT min(ts) AS ts FROM pts WHERE inr")
	switch {
	case r.Start != nil && !agg.byValue:
		first = sq.Expr("SELECT ?::timestamptz AS ts", *r.Start)
	case r.Start != nil || r.End != nil:
		// E8's origin by index probes (raw values only), so that pts is read once
		cv := newCover(r.Start, r.End, 0, TierBounds{})
		first = earliest(r.Start, r.End, &cv)
	}
	g := gridFor(r.Period, r.Zone, first)
	var origin any = ""
	if g.origin != nil {
		origin = sq.Expr(",\norigin AS MATERIALIZED (\n  ?\n)", g.origin)
	}
	zp := planZone(r.Period, r.Zone, r.Start, r.End)
	c := signalCover(rng, zp.usable, r.TierBounds)
	src, pieces := signalSource("SELECT id FROM vars", rng, r.Signal, c, true)
	var ctes []any
	notes := signalNoteOf(r.Signal, c)
	if pieces {
		ctes, notes = []any{",\nzonecheck AS MATERIALIZED (\n  ", zoneCheck(r.Zone, zp), "\n)"}, append(zp.notes(), notes...)
	}
	measured := intervalBuckets(r, agg, m, pieces)
	if agg.byValue {
		nv, cols := "count(*)", "pts.variable_id"
		if pieces {
			nv, cols = "sum(c.n)", "pts.variable_id, pts.n"
		}
		measured = sq.Expr(`,
buckets AS (
  SELECT vars.ord, b.key, `+m.expand(agg.expr)+` AS value
  FROM (
    SELECT c.variable_id, c.key, `+m.expand("SUM(c.inc)")+` AS inc, `+nv+` AS nv
    FROM (SELECT `+cols+`, ? AS key, `+increase(m, pieces)+` AS inc FROM sig pts WHERE pts.inr) c
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
)`, g.key)
	}
	stmt := sq.ConcatExpr(sources(r.AccountID, r.VariableIDs, src, ctes...), origin,
		signalCTEs("pts", rng, r.Signal, !agg.byValue, pieces), measured, seriesTail(agg.fill, g, r))
	return build(stmt, notes)
}

// intervalBuckets measures every bucket the signal's intervals reach: each interval
// split at the bucket edges it crosses (generate_series over the bucket keys from its
// start's to its end's), each piece's length and area in ms. nT/nH keys are their own
// edges; a local midnight (nD, W, M) costs a subquery, so those edges are computed
// once per bucket of the range (edges) and joined on the key.
func intervalBuckets(r ResampleRequest, agg *signalAggregation, m sums, pieces bool) sq.Sqlizer {
	g := gridFor(r.Period, r.Zone, nil)
	from := gridAt(r.Period, r.Zone, nil, "i.l").key
	to := gridAt(r.Period, r.Zone, nil, "(i.r - interval '1 microsecond')").key
	var edges any = ""
	var lo, hi sq.Sqlizer = sq.Expr(epochMillis("k.key")), sq.ConcatExpr("round(date_part('epoch', k.key + ", g.step, ") * 1000)::bigint")
	join := ""
	if r.Period.Unit != Minute && r.Period.Unit != Hour {
		edges = sq.ConcatExpr(`,
edges AS MATERIALIZED (
  SELECT k.key, round(date_part('epoch', `, localMidnight("k.key", r.Zone), `) * 1000)::bigint AS lo,
         round(date_part('epoch', `, localMidnight("n.next", r.Zone), `) * 1000)::bigint AS hi
  FROM (SELECT `, spanBound(r, true), ` AS lo_ts, `, spanBound(r, false), ` AS hi_ts) span
  CROSS JOIN LATERAL generate_series(`, gridAt(r.Period, r.Zone, nil, "span.lo_ts").key, `, `,
			gridAt(r.Period, r.Zone, nil, "span.hi_ts").key, `, `, g.step, `) AS k(key)
  CROSS JOIN LATERAL (SELECT k.key + `, g.step, ` AS next) n
)`)
		lo, hi, join = sq.Expr("e.lo"), sq.Expr("e.hi"), "\n      JOIN edges e ON e.key = k.key"
	}
	cols, insides := "*", any("")
	if pieces { // and each piece's inside, in the bucket of its first dot (the tile fits one)
		cols = "variable_id, q.key, q.a, q.b"
		insides = sq.ConcatExpr(`
      UNION ALL
      SELECT s.variable_id, `, gridAt(r.Period, r.Zone, nil, "s.ts").key, `, `+epochMillis("s.ts")+`, `+epochMillis("s.lt")+`, s.a0
      FROM sig s
      WHERE s.inr AND s.lt > s.ts`)
	}
	return sq.ConcatExpr(edges, `,
buckets AS (
  SELECT vars.ord, b.key, `+m.expand(agg.expr)+` AS value
  FROM (
    SELECT q.variable_id, q.key, sum(q.b - q.a) AS cov, `+m.expand("SUM(q.area)")+` AS area
    FROM (SELECT q.`+cols+`, `+area(r.Signal, "q.a", "q.b", m)+` AS area FROM (
      SELECT i.variable_id, k.key, i.t, i.v, i.t1, i.v1, greatest(i.lm, `, lo, `) AS a, least(i.rm, `, hi, `) AS b
      FROM iv i
      CROSS JOIN LATERAL generate_series(`, from, `, `, to, `, `, g.step, `) AS k(key)`+join+`
    ) q
    WHERE q.b > q.a`, insides, `) q
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
)`)
}

// spanBound is the first (lo) or last instant the clipped intervals can reach: the
// range's ends when given (now() with only a start), else the first or last value in
// range.
func spanBound(r ResampleRequest, lo bool) sq.Sqlizer {
	switch {
	case lo && r.Start != nil:
		return sq.Expr("?::timestamptz", *r.Start)
	case lo:
		return sq.Expr("(SELECT min(ts) FROM pts WHERE inr)")
	case r.End != nil:
		return sq.Expr("?::timestamptz", *r.End)
	case r.Start != nil:
		return sq.Expr("now()")
	}
	return sq.Expr("(SELECT max(ts) FROM pts WHERE inr)")
}

// signalStatistics are E7's CTEs for the time-aware aggregations (spts, sig, iv,
// tw: joined on the variable), their output columns and explain notes.
func signalStatistics(aggs []aggregation, r StatisticsRequest, m sums) (sq.Sqlizer, []string, []string) {
	var cols []string
	for _, a := range aggs {
		if a.signal != nil {
			cols = append(cols, m.expand(a.signal.expr)+" AS "+a.name+"_value")
		}
	}
	if len(cols) == 0 {
		return nil, nil, nil
	}
	start, end := r.Start.UTC(), r.End.UTC()
	rng := signalRange{&start, &end}
	c := signalCover(rng, len(tiers.All), r.TierBounds)
	src, pieces := signalSource("SELECT id FROM res WHERE id IS NOT NULL", rng, r.Signal, c, false)
	return sq.ConcatExpr(",\nspts AS (\n", src, "\n)",
		signalCTEs("spts", rng, r.Signal, true, pieces), signalMeasures(r.Signal, m, pieces)), cols, signalNoteOf(r.Signal, c)
}
