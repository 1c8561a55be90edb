package querybuilder

import (
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// Unit is the unit of a resample period (the pandas offset alias letter).
type Unit byte

// Units of resample periods (API.md §8).
const (
	Minute Unit = 'T'
	Hour   Unit = 'H'
	Day    Unit = 'D'
	Week   Unit = 'W'
	Month  Unit = 'M'
)

// Period is a validated resample period: N units (N is 1 for W and M).
type Period struct {
	Unit Unit
	N    int
}

func (p Period) String() string {
	if p.Unit == Week || p.Unit == Month {
		return string(p.Unit)
	}
	return fmt.Sprintf("%d%c", p.N, p.Unit)
}

// ResampleRequest is a validated E8 request. VariableIDs are public ids, resolved
// within the account by the statement itself.
type ResampleRequest struct {
	AccountID   int64
	VariableIDs []string
	Aggregation string
	Period      Period
	Zone        string // IANA name
	Start, End  *time.Time
	TierBounds
	Signal // time-aware aggregations only
	Series // extend and fill
}

// AggregationRequest is a validated E9 request. Join aggregates all variables together.
type AggregationRequest struct {
	AccountID   int64
	VariableIDs []string
	Aggregation string
	Join        bool
	Start, End  *time.Time
	TierBounds
	Signal // time-aware aggregations only
}

// Both statements return rows (ord, ts, value): ord is the 1-based position of the
// variable in the request (0 for a joined E9 aggregate), ts the label or timestamp in
// epoch milliseconds. A row with a NULL ts names a requested id that is unknown in the
// account: the statement resolves the ids itself, so reporting them costs no second
// round trip and cannot race with a concurrent delete.

// unknownIDs lists the requested positions that did not resolve to a variable.
const unknownIDs = `SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)`

// sources is the common head: the requested ids with their positions, the variables
// they name in the account, any further CTEs (each a ",\nname AS (...)"), and the
// summary rows of the values in range (pts: variable_id, ts and summary columns, for
// E9 with each variable's position ord too); a row stands for one value or one whole
// tile.
func sources(accountID int64, ids []string, pts sq.Sqlizer, ctes ...any) sq.Sqlizer {
	head := sq.Expr(`WITH req AS (
  SELECT r.ord, r.public_id
  FROM unnest(?::text[]) WITH ORDINALITY AS r(public_id, ord)
),
vars AS (
  SELECT req.ord, v.id
  FROM req
  JOIN variables v ON v.public_id = req.public_id AND v.account_id = ?
)`, ids, accountID)
	return sq.ConcatExpr(append(append([]any{head}, ctes...), ",\npts AS (\n", pts, "\n)")...)
}

// lastNote is the explain note of a request without a range.
const lastNote = "raw values: the last 100 of each variable (no range)"

// lastPoints: without a range (API.md §8), each variable's last 100 values come from a
// LATERAL top-N that walks the (variable_id, ts DESC) index backwards and stops after
// 100 rows (once per variable, however often it is requested), and unpacks only the
// packed days that can hold a variable's last 100 (packed_newest_day).
func lastPoints(cols []string) sq.Sqlizer {
	return sq.Expr(`    SELECT p.*
    FROM (SELECT DISTINCT id FROM vars) v
    CROSS JOIN LATERAL (
      SELECT * FROM (
        (SELECT ` + rawColumns("", cols) + ` FROM "values"
         WHERE variable_id = v.id
         ORDER BY ts DESC
         LIMIT 100)
        UNION ALL
        SELECT ` + rawColumns("", cols) + `
        FROM packed_dots(packed_newest_day(v.id, 100, 'infinity'), 'infinity') WHERE variable_id = v.id
      ) both_layouts
      ORDER BY ts DESC
      LIMIT 100
    ) p`)
}

// rangePoints are the summary rows (columns cols) of each variable's values over the
// cover, every branch one index scan for all the variables (a LATERAL per variable
// restarted each branch's scans once per variable: 40 ms where this takes 28 for 100
// variables). guarded: only while zonecheck holds, else the raw values of the range
// (zoneCheck).
func rangePoints(c cover, guarded bool, start, end *time.Time, cols []string) sq.Sqlizer {
	return rangePointsUsing(c, guarded, start, end, cols, nil, "SELECT id FROM vars")
}

// rangePointsUsing is rangePoints of the variables that vars selects (a column id;
// guarded: "vars") with every tile span read through use (nil: every tile).
func rangePointsUsing(c cover, guarded bool, start, end *time.Time, cols []string, use *tileUse, vars string) sq.Sqlizer {
	if !guarded {
		return sq.ConcatExpr("    ", summariesUsing("ANY (ARRAY("+vars+"))", c, cols, use))
	}
	// The guard picks the keys (an init plan, once) rather than filtering each branch:
	// a one-time filter per branch cost a node every row passes, 5% of case A.
	return sq.ConcatExpr("    ", summariesUsing("ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck)))", c, cols, use), `
    UNION ALL
    `, rawSummaries("ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck)))", inRange("x.ts", start, end),
		packedRange(start, end), cols))
}

// joinOrd gives every summary row its variable's position in the request.
func joinOrd(rows sq.Sqlizer) sq.Sqlizer {
	return sq.ConcatExpr("  SELECT vars.ord, p.*\n  FROM vars\n  JOIN (\n", rows, "\n  ) p ON p.variable_id = vars.id")
}

// packedRange is the range rule's bounds as packed_dots' first and last.
func packedRange(start, end *time.Time) sq.Sqlizer {
	return sq.ConcatExpr(packedFirst(start), ", ", packedLast(end))
}

// packedFirst is the range rule's first instant (none: the first value).
func packedFirst(start *time.Time) sq.Sqlizer {
	if start == nil {
		return sq.Expr("'-infinity'::timestamptz")
	}
	return sq.Expr("?::timestamptz", *start)
}

// packedLast is the range rule's last instant (none: now).
func packedLast(end *time.Time) sq.Sqlizer {
	if end == nil {
		return sq.Expr("now()")
	}
	return sq.Expr("?::timestamptz", *end)
}

// inRange is the range rule's predicate on a ts column (one bound may be open; "only
// start" runs to now).
func inRange(col string, start, end *time.Time) sq.Sqlizer {
	switch {
	case end == nil:
		return sq.Expr(col+` >= ? AND `+col+` <= now()`, *start)
	case start == nil:
		return sq.Expr(col+` <= ?`, *end)
	}
	return sq.Expr(col+` >= ? AND `+col+` <= ?`, *start, *end)
}

// earliest is the earliest point in range among the variables: per variable one index
// probe of the raw values (LIMIT 1 on (variable_id, ts)), the first two packed days in
// range (their first dot, ts_base, unless the range starts inside the day: then that
// day's dots from the start; the second day covers a first one with none left), and
// one of the minute tier
// over the cover's whole minutes (their first dots: the only trace of values that
// retention removed), so that finding the grid origin does not read the points and
// pts stays a single-use CTE that PostgreSQL inlines into the aggregation. Without a
// range (c nil), pts holds at most 100 rows a variable: read them.
func earliest(start, end *time.Time, c *cover) sq.Sqlizer {
	if c == nil {
		return sq.Expr(`SELECT min(ts) AS ts FROM pts`)
	}
	return sq.ConcatExpr(`SELECT min(f.ts) AS ts FROM vars CROSS JOIN LATERAL (
    (SELECT ts FROM "values" WHERE variable_id = vars.id AND `, inRange("ts", start, end), `
    ORDER BY ts LIMIT 1)
    UNION ALL
    (SELECT min(CASE WHEN p.ts_base >= `, packedFirst(start), ` THEN p.ts_base ELSE
         (SELECT min(x.ts) FROM packed_dots(`, packedFirst(start), `, least(p.day + INTERVAL '1 day' - INTERVAL '1 microsecond', `,
		packedLast(end), `)) x WHERE x.variable_id = p.variable_id) END)
     FROM (SELECT variable_id, day, ts_base FROM values_packed WHERE variable_id = vars.id
           AND day >= time_bucket(INTERVAL '1 day', `, packedFirst(start), `) AND day <= `, packedLast(end), `
           ORDER BY day LIMIT 2) p
     WHERE p.ts_base <= `, packedLast(end), `)
    UNION ALL
    `, sq.Expr(`(SELECT first_ts FROM `+tiers.Minutes.Table+` WHERE variable_id = vars.id AND tile >= ? AND tile < ?
    ORDER BY tile LIMIT 1)) f`, c.start, c.hi[0]))
}

// grid says how one period kind buckets points: origin is the CTE the key needs (or
// nothing), key maps pts.ts to the bucket key, step is the distance between keys, and
// label turns a key (column g.key) into the timestamptz label pandas gives it.
//
// TimescaleDB 2.19's time_bucket shifts buckets around DST changes when given an
// origin or offset together with a time zone, so the two are never combined:
// minutes and hours are fixed widths of absolute time from the origin instant
// (time_bucket with a timestamptz origin and no zone), while days, weeks and months
// are counted on local wall-clock time (ts AT TIME ZONE tz, a timestamp without zone)
// and only the label goes back through AT TIME ZONE.
type grid struct {
	origin, key, step, label sq.Sqlizer
}

func gridFor(p Period, zone string, first sq.Sqlizer) grid { return gridAt(p, zone, first, "pts.ts") }

// gridAt is gridFor with the key of the timestamptz SQL col (the compiler's own text).
func gridAt(p Period, zone string, first sq.Sqlizer, col string) grid {
	switch p.Unit {
	case Minute, Hour:
		unit := map[Unit]string{Minute: "mins", Hour: "hours"}[p.Unit]
		width := sq.Expr("make_interval("+unit+" => ?)", p.N)
		return grid{
			// the instant of local midnight of the day of the earliest point
			origin: sq.Expr(`SELECT ? AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (?) fp) d`,
				localMidnight("d.day", zone), zone, first),
			key:   sq.Expr("time_bucket(?, "+col+", (SELECT at FROM origin))", width),
			step:  width,
			label: sq.Expr("g.key"),
		}
	case Day:
		return grid{
			// the local date of the earliest point; buckets are n local dates from it
			origin: sq.Expr(`SELECT (fp.ts AT TIME ZONE ?)::date AS day FROM (?) fp`, zone, first),
			key:    sq.Expr("((SELECT day FROM origin) + (("+col+" AT TIME ZONE ?)::date - (SELECT day FROM origin)) / ? * ?)::timestamp", zone, p.N, p.N),
			step:   sq.Expr("make_interval(days => ?)", p.N),
			label:  localMidnight("g.key", zone),
		}
	case Week:
		// key: local Monday 00:00; label: the Sunday that ends the week
		return grid{
			key:   sq.Expr("date_trunc('week', "+col+" AT TIME ZONE ?)", zone),
			step:  sq.Expr("interval '7 days'"),
			label: localMidnight("(g.key + interval '6 days')", zone),
		}
	}
	// Month. key: local first of the month; label: its last day
	return grid{
		key:   sq.Expr("date_trunc('month', "+col+" AT TIME ZONE ?)", zone),
		step:  sq.Expr("interval '1 month'"),
		label: localMidnight("(g.key + interval '1 month' - interval '1 day')", zone),
	}
}

// freeGrid is gridFor's grid without an origin, for the periods whose buckets are the
// same whatever the day of the first point (see Expr.anchored): one local day, and, in
// UTC, minutes or hours that divide a day (time_bucket's default origin is a UTC
// midnight). ok is false for the others.
func freeGrid(p Period, zone string) (g grid, ok bool) {
	switch {
	case p.Unit == Day && p.N == 1:
		return grid{
			key:   sq.Expr("(pts.ts AT TIME ZONE ?)::date::timestamp", zone),
			step:  sq.Expr("interval '1 day'"),
			label: localMidnight("g.key", zone),
		}, true
	case (p.Unit == Minute && 24*60%p.N == 0 || p.Unit == Hour && 24%p.N == 0) && zone == "UTC":
		unit := map[Unit]string{Minute: "mins", Hour: "hours"}[p.Unit]
		width := sq.Expr("make_interval("+unit+" => ?)", p.N)
		return grid{key: sq.Expr("time_bucket(?, pts.ts)", width), step: width, label: sq.Expr("g.key")}, true
	}
	return grid{}, false
}

// localMidnight is the first instant of the local day whose 00:00 is the timestamp
// wall, as pandas labels it: PostgreSQL reads a midnight that happens twice (a change
// from 01:00 back to 00:00, as in Atlantic/Azores or America/Havana) as the later
// instant, pandas (ambiguous=True) as the earlier one. The earlier reading is the same
// wall time of the day before plus 24 real hours, kept only when it shows that wall
// time; least() keeps the earlier of the two. A midnight that does not exist reads as
// the end of the gap in both.
func localMidnight(wall, zone string) sq.Sqlizer {
	return sq.Expr(`least(`+wall+` AT TIME ZONE ?, (
    SELECT e FROM (SELECT (`+wall+` - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = `+wall+`))`, zone, zone, zone)
}

// Resample compiles an E8 request into one statement: rows per variable from its first
// to its last non-empty bucket, empty buckets filled (NULL, or 0 for count and sum),
// newest first within each variable.
func Resample(r ResampleRequest) (Query, error) {
	return withIEEE(func(s sums) (Query, error) { return resample(r, s) })
}

func resample(r ResampleRequest, s sums) (Query, error) {
	if sig := signalAggregationNamed(r.Aggregation); sig != nil {
		return signalResample(r, sig, s)
	}
	agg, ok := resampleAggregationNamed(r.Aggregation)
	if !ok {
		return Query{}, fmt.Errorf("resample: unknown aggregation %q", r.Aggregation)
	}
	// Empty buckets are the keys between each bucket and the next of its variable
	// (lead()): only the gaps are generated, and no join or grouping matches them with
	// the buckets (a LEFT JOIN of a full series to buckets ran as a merge join on ord
	// alone, quadratic: 12 s for the 8760 hours of a year; grouping a full series with
	// them cost a third of a 1H resample over tiles). The lead() pass (a sort and a
	// window) runs only over variables with gaps: n keys without one span exactly n-1
	// steps (keys are on the grid, and timestamp + k months is calendar arithmetic).
	// That check is one hash aggregate, a seventh of the time of the window over the
	// 16,900 buckets of bench-tiers case A.
	pts, ctes, notes := lastPoints(agg.cols), []any{}, []string{lastNote}
	var c *cover
	if r.Start != nil || r.End != nil {
		zp := planZone(r.Period, r.Zone, r.Start, r.End)
		cv := newCover(r.Start, r.End, zp.usable, r.TierBounds)
		pts, ctes, c = rangePoints(cv, true, r.Start, r.End, agg.cols), []any{",\nzonecheck AS MATERIALIZED (\n  ", zoneCheck(r.Zone, zp), "\n)"}, &cv
		notes = append(zp.notes(), cv.notes()...)
	}
	g := gridFor(r.Period, r.Zone, earliest(r.Start, r.End, c))
	var origin any = "" // W and M need no origin
	if g.origin != nil {
		// MATERIALIZED: inlined, the one-row min(ts) became the inner side of a nested
		// loop and was recomputed for every point (quadratic, seconds for 10k points)
		origin = sq.Expr(",\norigin AS MATERIALIZED (\n  ?\n)", g.origin)
	}
	// Buckets are grouped by variable and only then given their position: joining the
	// positions first put a hash join in the path of every summary row (7 of the 60 ms
	// of bench-tiers case A in psql). pts holds the columns the aggregate reads only.
	stmt := sq.ConcatExpr(sources(r.AccountID, r.VariableIDs, pts, ctes...), origin, sq.Expr(`,
buckets AS (
  SELECT vars.ord, b.key, b.value
  FROM (
    SELECT pts.variable_id, ? AS key, `+s.expand(agg.expr)+` AS value
    FROM pts
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
)`, g.key), seriesTail(agg.fill, g, r))
	return build(stmt, notes)
}

// Aggregation compiles an E9 request into one statement: one row per variable with
// values in range (or one row in all for a join), from the summary rows of every tier
// (no zone: every tier fits a UTC range). The timestamp is the earliest one reaching
// the value for min and max (each summary row keeps its own), else the latest one in
// range (each row's last dot); across variables (join) the earliest timestamp wins ties.
func Aggregation(r AggregationRequest) (Query, error) {
	return withIEEE(func(s sums) (Query, error) { return aggregationOf(r, s) })
}

func aggregationOf(r AggregationRequest, s sums) (Query, error) {
	if sig := signalAggregationNamed(r.Aggregation); sig != nil {
		return signalAggregationOf(r, sig, s)
	}
	agg, ok := resampleAggregationNamed(r.Aggregation)
	if !ok {
		return Query{}, fmt.Errorf("aggregation: unknown aggregation %q", r.Aggregation)
	}
	expr := s.expand(agg.expr)
	var result string
	switch {
	case agg.extreme != nil:
		result = `SELECT ord, ` + agg.extreme.at + ` AS ts, ` + expr + ` AS value FROM pts GROUP BY ord`
		if r.Join {
			result = `SELECT 0 AS ord, ts, value FROM (
  ` + result + `
) e ORDER BY value ` + agg.extreme.order + `, ts LIMIT 1`
		}
	case r.Join:
		result = `SELECT 0 AS ord, max(last_ts) AS ts, ` + expr + ` AS value FROM pts HAVING count(*) > 0`
	default:
		result = `SELECT ord, max(last_ts) AS ts, ` + expr + ` AS value FROM pts GROUP BY ord`
	}
	rows, notes := lastPoints(summaryColumns), []string{lastNote}
	if r.Start != nil || r.End != nil {
		c := newCover(r.Start, r.End, len(tiers.All), r.TierBounds)
		rows, notes = rangePoints(c, false, r.Start, r.End, summaryColumns), c.notes()
	}
	stmt := sq.ConcatExpr(sources(r.AccountID, r.VariableIDs, joinOrd(rows)), `,
result AS (
  `+result+`
)
`+unknownIDs+`
UNION ALL
SELECT ord, `+epochMillis("ts")+`, value FROM result
ORDER BY 1, 2 NULLS FIRST`)
	return build(stmt, notes)
}

// epochMillis is a timestamptz column as Unix milliseconds, through float8 rather than
// extract()'s numeric (5% of a 1H resample of 100 variables over a week). Exact for
// the whole milliseconds the service stores: float8 holds epoch microseconds to
// within 1e-4 ms, far from round()'s halfway points.
func epochMillis(col string) string {
	return "round(date_part('epoch', " + col + ") * 1000)::bigint"
}

func build(s sq.Sqlizer, notes []string) (Query, error) {
	sql, args, err := s.ToSql()
	if err != nil {
		return Query{}, fmt.Errorf("build statement: %w", err)
	}
	return Query{SQL: sql, Args: args, Notes: notes}, nil
}
