package values

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/querybuilder"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// The rollup tiers (tiers: minutes, quarters, days) change in the same transaction
// as the values they summarize, always after the variable's row is locked (lastValueSQL,
// or Delete's lock), so that two writers of one variable update its tiles one after
// the other and each statement sees what the other committed:
//   - rows that are all new (the fast path) add their per-tile rollups to every tier
//     (addTilesSQL): additions commute, so order is free;
//   - when some rows replaced stored ones (the upsert path) or were deleted, min, max
//     and the spread cannot be taken back: the minutes they touched are recomputed from
//     "values", then each coarser tier's touched tiles from the tier below
//     (recomputeTilesSQL), finest first.
//
// Every tier is kept so only for the tiles that end by their variable's mark,
// rollups_until (rollupmark.go), which the write reads under the row lock: later tiles
// are built from the values by CatchUp when it moves the mark, and readers use tiles
// only before the smallest mark. A tile past the mark may be missing or partial; the
// statements here leave it so, since CatchUp recomputes it rather than adds to it.
//
// The migrations that made the tiers filled them for the values already stored with
// frozen copies of this arithmetic (sql/20261122000020_value_minutes.up.sql,
// 20261124000004_minute_spread.up.sql, 20261124000005_tiers.up.sql): each runs against
// the schema of its date, which the functions here do not follow. A change here leaves
// the tiles they made as they are; `sensorapi rollups rebuild` recomputes them through
// tileSource.

// tileSums are the rollups of a batch in one tier, as parallel arrays for unnest.
type tileSums struct {
	vars                  []int64
	tiles                 []time.Time
	n                     []int32
	sum, min, max         []float64
	ks, m2                []float64 // sum of (value - min); sum of squared deviations
	firstTS, lastTS       []time.Time
	firstValue, lastValue []float64
	minTS, maxTS          []time.Time
	// the signal inside the tile (time-aware aggregations): NaN and -1 (stored as NULL)
	// when a value lies outside the spread's limits
	areaLocf, areaLinear, increase []float64
	longest                        []int64
}

// spreadLimit is the largest magnitude whose spread is kept: a square beyond it would
// overflow double precision. spreadFloor is the smallest nonzero one: below it the
// merges' quotients and squares of differences round to 0, which PostgreSQL refuses as
// an underflow (a quarter of 5e-324, 0, 0 failed its rebuild). A tile holding a value
// outside them has no spread (NULL), and std over a range with such a tile is null
// rather than an error.
const (
	spreadLimit = 1e150
	spreadFloor = 1e-100
)

// tiny tells whether a row's value is below spreadFloor (and not 0).
func tiny(r Row) bool { return r.Value != 0 && math.Abs(r.Value) < spreadFloor }

// spread is the tile's shifted sum and sum of squared deviations, in two passes over
// values shifted by the tile's min; NaN (stored as NULL) beyond spreadLimit.
func spread(rows []Row, lo, hi float64) (float64, float64) {
	if math.Abs(lo) > spreadLimit || math.Abs(hi) > spreadLimit || slices.ContainsFunc(rows, tiny) {
		return math.NaN(), math.NaN()
	}
	ks := 0.0
	for _, r := range rows {
		ks += r.Value - lo
	}
	mean, m2 := ks/float64(len(rows)), 0.0
	for _, r := range rows {
		d := r.Value - lo - mean
		m2 += d * d
	}
	return ks, m2
}

// sumTiles rolls rows up per (variable, tile of t); rows are sorted by (variable, ts).
func sumTiles(rows []Row, t tiers.Tier) tileSums {
	var s tileSums
	for i := 0; i < len(rows); {
		j := i + 1 // rows[i:j] is one (variable, tile)
		for j < len(rows) && rows[j].Variable == rows[i].Variable && t.Floor(rows[j].TS) == t.Floor(rows[i].TS) {
			j++
		}
		s.add(rows[i].Variable, t.Floor(rows[i].TS), rows[i:j])
		i = j
	}
	return s
}

// add appends one tile's rollup of rows (sorted by ts). The spread is computed in two
// passes over values shifted by the tile's min, which keeps it exact to the last bits
// however large the values are.
func (s *tileSums) add(variable, tile int64, rows []Row) {
	lo, hi, sum := rows[0], rows[0], 0.0
	for _, r := range rows {
		if r.Value < lo.Value {
			lo = r
		}
		if r.Value > hi.Value {
			hi = r
		}
		sum += r.Value
	}
	ks, m2 := spread(rows, lo.Value, hi.Value)
	first, last := rows[0], rows[len(rows)-1]
	s.vars = append(s.vars, variable)
	s.tiles = append(s.tiles, time.UnixMilli(tile).UTC())
	s.n = append(s.n, int32(len(rows)))
	s.sum, s.min, s.max = append(s.sum, sum), append(s.min, lo.Value), append(s.max, hi.Value)
	s.ks, s.m2 = append(s.ks, ks), append(s.m2, m2)
	s.firstTS, s.firstValue = append(s.firstTS, time.UnixMilli(first.TS).UTC()), append(s.firstValue, first.Value)
	s.lastTS, s.lastValue = append(s.lastTS, time.UnixMilli(last.TS).UTC()), append(s.lastValue, last.Value)
	s.minTS, s.maxTS = append(s.minTS, time.UnixMilli(lo.TS).UTC()), append(s.maxTS, time.UnixMilli(hi.TS).UTC())
	in := signalInside(rows, lo.Value, hi.Value)
	s.areaLocf, s.areaLinear = append(s.areaLocf, in.locf), append(s.areaLinear, in.linear)
	s.increase, s.longest = append(s.increase, in.increase), append(s.longest, in.longest)
}

// inside is the signal between a tile's own dots (sql/20261204000001_tile_signal.up.sql):
// the areas of the held and the interpolated signal (value·ms), the counter's increase
// after the first dot, the longest interval (ms).
type inside struct {
	locf, linear, increase float64
	longest                int64
}

// signalInside is the inside of a tile of rows (sorted by ts, min lo and max hi): NaN
// and -1 when a value lies outside the spread's limits, as for the spread.
func signalInside(rows []Row, lo, hi float64) inside {
	if math.Abs(lo) > spreadLimit || math.Abs(hi) > spreadLimit || slices.ContainsFunc(rows, tiny) {
		return inside{math.NaN(), math.NaN(), math.NaN(), -1}
	}
	var in inside
	for i := 1; i < len(rows); i++ {
		p, r := rows[i-1], rows[i]
		dt := float64(r.TS - p.TS)
		in.locf += p.Value * dt
		in.linear += (p.Value + r.Value) * dt / 2
		in.increase += counterStep(p.Value, r.Value)
		in.longest = max(in.longest, r.TS-p.TS)
	}
	return in
}

// counterStep is a value's contribution to a counter's increase after the value prev:
// the difference, or the value itself after a restart (it fell).
func counterStep(prev, v float64) float64 {
	if v >= prev {
		return v - prev
	}
	return v
}

// args are the statement arguments of addTilesSQL.
func (s tileSums) args() []any {
	return []any{s.vars, s.tiles, s.n, s.sum, s.min, s.max, s.ks, s.m2,
		s.firstTS, s.firstValue, s.lastTS, s.lastValue, s.minTS, s.maxTS,
		s.areaLocf, s.areaLinear, s.increase, s.longest}
}

// tileColumns are the columns every tier has, in this order.
const tileColumns = `variable_id, tile, n, sum, min, max, ks, m2, first_ts, first_value, last_ts, last_value, min_ts, max_ts,
    area_locf, area_linear, increase, longest_ms`

// signalColumns are the tile's inside (tileColumns' last four), NULL together.
var signalColumns = []string{"area_locf", "area_linear", "increase", "longest_ms"}

// epochMs is SQL for a timestamptz column as epoch milliseconds (exact for the whole
// milliseconds stored).
func epochMs(col string) string { return "round(date_part('epoch', " + col + ") * 1000)::bigint" }

// joinedInside is SQL for the inside of two parts of a tile, a and b (aliases of rows with
// tileColumns), a's dots all before b's: each part's inside and the interval from a's last
// dot to b's first. NULL when either part's is; the arithmetic runs only when both are
// known (every value within the spread's limits: nothing overflows). Columns: signalColumns.
func joinedInside(a, b string) []string {
	dt := "(" + epochMs(b+".first_ts") + " - " + epochMs(a+".last_ts") + ")"
	known := "CASE WHEN " + a + ".longest_ms IS NOT NULL AND " + b + ".longest_ms IS NOT NULL THEN "
	return []string{
		known + a + ".area_locf + " + a + ".last_value * " + dt + " + " + b + ".area_locf END",
		known + a + ".area_linear + (" + a + ".last_value + " + b + ".first_value) * " + dt + " / 2 + " + b + ".area_linear END",
		known + a + ".increase + " + counterStepSQL(a+".last_value", b+".first_value") + " + " + b + ".increase END",
		known + "greatest(" + a + ".longest_ms, " + dt + ", " + b + ".longest_ms) END",
	}
}

// counterStepSQL is counterStep in SQL.
func counterStepSQL(prev, v string) string {
	return "CASE WHEN " + v + " >= " + prev + " THEN " + v + " - " + prev + " ELSE " + v + " END"
}

// addTilesSQL adds new rows' rollups to their tiles of one tier. The spread merges by
// Chan et al.'s formula, both parts' shifted sums moved to the new min first (every
// SET expression reads the row as it was):
//
//	ks = ks₁ + n₁(min₁ − min) + ks₂ + n₂(min₂ − min)
//	m2 = m2₁ + m2₂ + δ²·n₁n₂/(n₁+n₂),  δ = (ks₂/n₂ + min₂) − (ks₁/n₁ + min₁)
//
// A part without a spread (NULL: beyond spreadLimit) leaves the tile without one. New
// rows never share a timestamp with stored ones (that is the upsert path), so the
// first and last dots are the older and newer of the two parts'; ties on min or max
// keep the earlier timestamp.
//
// It returns the tiles it left without an inside although their values lie within the
// spread's limits (ks): new dots fell between stored ones, and writeTiles
// recomputes those. Returning them, rather than looking for them afterwards, keeps the
// usual write (no such tile) from a statement whose join over the tier's every chunk
// cost more than the add (2 years of weekly chunks: 16 ms planned and 16 ms run per
// batch, measured with EXPLAIN ANALYZE).
func addTilesSQL(table string) string {
	return `WITH added AS (
INSERT INTO ` + table + ` AS m (` + tileColumns + `)
SELECT v, t, n, s, lo, hi, nullif(k, 'NaN'), nullif(q, 'NaN'), ft, fv, lt, lv, lot, hit,
       nullif(al, 'NaN'), nullif(ai, 'NaN'), nullif(inc, 'NaN'), nullif(g, -1)
FROM unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::float8[], $5::float8[], $6::float8[],
            $7::float8[], $8::float8[], $9::timestamptz[], $10::float8[], $11::timestamptz[], $12::float8[],
            $13::timestamptz[], $14::timestamptz[], $15::float8[], $16::float8[], $17::float8[], $18::bigint[])
     AS u(v, t, n, s, lo, hi, k, q, ft, fv, lt, lv, lot, hit, al, ai, inc, g)
ON CONFLICT (variable_id, tile) DO UPDATE
SET n = m.n + EXCLUDED.n, sum = ieee_add(m.sum, EXCLUDED.sum),
    min = least(m.min, EXCLUDED.min), max = greatest(m.max, EXCLUDED.max),
    ks = CASE WHEN m.ks IS NOT NULL AND EXCLUDED.ks IS NOT NULL -- both within ±1e150: nothing overflows
        THEN m.ks + m.n * (m.min - least(m.min, EXCLUDED.min))
           + EXCLUDED.ks + EXCLUDED.n * (EXCLUDED.min - least(m.min, EXCLUDED.min)) END,
    m2 = CASE WHEN m.ks IS NOT NULL AND EXCLUDED.ks IS NOT NULL
        THEN m.m2 + EXCLUDED.m2
           + power((EXCLUDED.ks / EXCLUDED.n - m.ks / m.n) + (EXCLUDED.min - m.min), 2)
             * m.n * EXCLUDED.n / (m.n + EXCLUDED.n) END,
    first_ts = least(m.first_ts, EXCLUDED.first_ts),
    first_value = CASE WHEN EXCLUDED.first_ts < m.first_ts THEN EXCLUDED.first_value ELSE m.first_value END,
    last_ts = greatest(m.last_ts, EXCLUDED.last_ts),
    last_value = CASE WHEN EXCLUDED.last_ts > m.last_ts THEN EXCLUDED.last_value ELSE m.last_value END,
    min_ts = CASE WHEN EXCLUDED.min < m.min THEN EXCLUDED.min_ts WHEN EXCLUDED.min > m.min THEN m.min_ts
        ELSE least(m.min_ts, EXCLUDED.min_ts) END,
    max_ts = CASE WHEN EXCLUDED.max > m.max THEN EXCLUDED.max_ts WHEN EXCLUDED.max < m.max THEN m.max_ts
        ELSE least(m.max_ts, EXCLUDED.max_ts) END,` + addedInside() + `
RETURNING m.variable_id, m.tile, m.longest_ms IS NULL AND m.ks IS NOT NULL AS interleaved)
SELECT variable_id, tile FROM added WHERE interleaved`
}

// addedInside is addTilesSQL's SET of the tile's inside: the two parts joined when the new
// dots all come after the stored ones or all before them, else NULL (the new dots fall
// between stored ones: writeTiles recomputes the tile).
func addedInside() string {
	after, before := joinedInside("m", "EXCLUDED"), joinedInside("EXCLUDED", "m")
	out := make([]string, len(signalColumns))
	for i, c := range signalColumns {
		out[i] = "\n    " + c + " = CASE WHEN EXCLUDED.first_ts > m.last_ts THEN " + after[i] +
			"\n        WHEN EXCLUDED.last_ts < m.first_ts THEN " + before[i] + " END"
	}
	return strings.Join(out, ",")
}

// Sources of raw values for rawTileSQL, as x: the rows of "values", or both layouts
// of the variable $1 from $2 on (rebuilds and checks of whole variables).
const (
	rowsSource = `"values" x`
	bothSource = `(SELECT variable_id, ts, value FROM "values"
      UNION ALL
      SELECT variable_id, ts, value FROM packed_values(ARRAY[$1::bigint], $2, 'infinity')) x`
)

// rawTileSQL rolls the raw values of one variable in from (rowsSource or bothSource) up
// into tiles of width (an interval literal) for the values that satisfy cond (which names
// the outer query's columns as x.*): the columns of tileColumns. The spread is shifted by
// each tile's min (see addTilesSQL). It groups by tile alone: the windows sort the rows
// by tile, so the groups stream out of that order (a GroupAggregate) instead of being
// hashed, which spilled to disk past work_mem (the minute tiles of 10 M rows of one
// variable: 24–31 s instead of 40–42 s, and no 733 MB of spilled batches). Hence one
// variable per evaluation: every caller's from or cond names one (a LATERAL per
// variable, or $1).
func rawTileSQL(width, from, cond string) string {
	return `SELECT min(variable_id), tile, count(*)::int, ` + querybuilder.SumSQL("value") + `, min(value), max(value),
       -- the FILTERs keep the aggregates from overflowing; the CASEs drop what they saw
       -- (spreadLimit, spreadFloor)
       CASE WHEN max(abs(value)) <= 1e150 AND NOT bool_or(value <> 0 AND abs(value) < 1e-100)
           THEN sum(value - lo) FILTER (WHERE abs(lo) <= 1e150 AND abs(value) <= 1e150) END,
       CASE WHEN max(abs(value)) <= 1e150 AND NOT bool_or(value <> 0 AND abs(value) < 1e-100)
           THEN var_pop(value - lo) FILTER (WHERE abs(lo) <= 1e150 AND abs(value) <= 1e150) * count(*) END,
       min(ts), first(value, ts), max(ts), last(value, ts), first(ts, ROW(value, ts)), first(ts, ROW(-value, ts)),
       ` + rawInside(`max(abs(value)) <= 1e150 AND NOT bool_or(value <> 0 AND abs(value) < 1e-100)`) + `
FROM (SELECT x.variable_id, time_bucket(INTERVAL '` + width + `', x.ts) AS tile, x.ts, x.value,
             min(x.value) OVER (PARTITION BY x.variable_id, time_bucket(INTERVAL '` + width + `', x.ts)) AS lo,
             lag(x.value) OVER d AS pv, ` + epochMs("x.ts") + ` - ` + epochMs("lag(x.ts) OVER d") + ` AS dt
      FROM ` + from + ` WHERE ` + cond + `
      WINDOW d AS (PARTITION BY x.variable_id, time_bucket(INTERVAL '` + width + `', x.ts) ORDER BY x.ts)) x
GROUP BY tile`
}

// rawInside are rawTileSQL's aggregates of the tile's inside (signalColumns) over dots
// with their previous value pv and the interval from it dt (NULL for the first dot), all
// NULL unless known (the spread's limits). The FILTER keeps the sums from overflowing.
func rawInside(known string) string {
	const pair = `(value = 0 OR abs(value) BETWEEN 1e-100 AND 1e150) AND (pv = 0 OR abs(pv) BETWEEN 1e-100 AND 1e150)`
	sum := func(e string) string {
		return `CASE WHEN ` + known + ` THEN coalesce(sum(` + e + `) FILTER (WHERE ` + pair + `), 0) END`
	}
	return sum(`pv * dt`) + `,
       ` + sum(`(pv + value) * dt / 2`) + `,
       ` + sum(counterStepSQL("pv", "value")) + `,
       CASE WHEN ` + known + ` THEN coalesce(max(dt), 0) END`
}

// mergeTileSQL merges the tiles of table child into tiles of width (an interval
// literal) for the child rows that satisfy cond (naming them c.*): the columns of
// tileColumns, by Chan et al.'s formula. Each child's mean is written as a = (min −
// the tile's min) + ks/n, small numbers however large the values; then ks = Σ n·a and
// m2 = Σ m2 + Σ n(a − ā)², ā = ks / Σ n (the windows give every child its tile's min
// and ā). A child without a spread leaves the tile without one.
func mergeTileSQL(child, width, cond string) string {
	return `SELECT variable_id, parent, sum(n)::int, ` + querybuilder.SumSQL("sum") + `, min(min), max(max),
       CASE WHEN count(*) = count(ks) THEN sum(n * a) END,
       CASE WHEN count(*) = count(ks) THEN sum(m2) + sum(n * power(a - abar, 2)) END,
       min(first_ts), first(first_value, first_ts), max(last_ts), last(last_value, last_ts),
       first(min_ts, ROW(min, min_ts)), first(max_ts, ROW(-max, max_ts)),
       CASE WHEN count(*) = count(longest_ms) THEN sum(area_locf) + coalesce(sum(j_locf), 0) END,
       CASE WHEN count(*) = count(longest_ms) THEN sum(area_linear) + coalesce(sum(j_linear), 0) END,
       CASE WHEN count(*) = count(longest_ms) THEN sum(increase) + coalesce(sum(j_increase), 0) END,
       CASE WHEN count(*) = count(longest_ms) THEN greatest(max(longest_ms), max(j_longest)) END
FROM (SELECT y.*, sum(y.n * y.a) OVER w / sum(y.n) OVER w AS abar
      FROM (SELECT c.*, time_bucket(INTERVAL '` + width + `', c.tile) AS parent,
                   -- only where every child has a spread: a child without one holds values
                   -- past 1e150, and the difference of mins could overflow
                   CASE WHEN count(c.ks) OVER p = count(*) OVER p THEN (c.min - min(c.min) OVER p) + c.ks / c.n END AS a,
                   ` + junctions() + `
            FROM ` + child + ` c WHERE ` + cond + `
            WINDOW p AS (PARTITION BY c.variable_id, time_bucket(INTERVAL '` + width + `', c.tile)),
                   q AS (PARTITION BY c.variable_id, time_bucket(INTERVAL '` + width + `', c.tile) ORDER BY c.tile)) y
      WINDOW w AS (PARTITION BY y.variable_id, y.parent)) z
GROUP BY variable_id, parent`
}

// junctions are mergeTileSQL's columns of the interval from the previous child's last dot
// to this child's first (window q): what it adds to each of signalColumns (j_locf,
// j_linear, j_increase, j_longest), when both children's insides are known.
func junctions() string {
	prev := func(col string) string { return "lag(c." + col + ") OVER q" }
	dt := "(" + epochMs("c.first_ts") + " - " + epochMs(prev("last_ts")) + ")"
	known := "CASE WHEN c.longest_ms IS NOT NULL AND " + prev("longest_ms") + " IS NOT NULL THEN "
	return known + prev("last_value") + " * " + dt + " END AS j_locf,\n                   " +
		known + "(" + prev("last_value") + " + c.first_value) * " + dt + " / 2 END AS j_linear,\n                   " +
		known + counterStepSQL(prev("last_value"), "c.first_value") + " END AS j_increase,\n                   " +
		known + dt + " END AS j_longest"
}

// interval is a tier's width as a SQL interval literal's text.
func interval(t tiers.Tier) string { return fmt.Sprintf("%d seconds", int64(t.Width/time.Second)) }

// tileSource is the SELECT that computes tier i's tiles satisfying cond from the tier
// below (or from "values" for the finest tier). cond names the source rows as src.*.
func tileSource(i int, cond string) string {
	t := tiers.All[i]
	if i == 0 {
		return rawTileSQL(interval(t), rowsSource, strings.ReplaceAll(cond, "src.", "x."))
	}
	return mergeTileSQL(tiers.All[i-1].Table, interval(t), strings.ReplaceAll(cond, "src.", "c."))
}

// recomputeTilesSQL rebuilds the listed (variable, tile) rollups of tier i ($1, $2;
// recomputeArgs) from the tier below it (the finest: from "values"), removing those
// that hold no value any more. The listed tiles may repeat; each is one index range
// scan of its source. $3 and $4, the first and last of the tiles, let the planner leave
// out the chunks of the source and the tier outside them, as daysBetween does.
func recomputeTilesSQL(i int) string {
	return recomputeTilesFrom(i, `unnest($1::bigint[], $2::timestamptz[])`, "$3::timestamptz", "$4::timestamptz")
}

// recomputeArgs are recomputeTilesSQL's arguments for the (variable, tile) pairs.
func recomputeArgs(vars []int64, tiles []time.Time) []any {
	first, last := timeBounds(tiles)
	return []any{vars, tiles, first, last}
}

// recomputeTilesFrom is recomputeTilesSQL of the (variable, tile) pairs that the FROM
// item wanted yields (a history import's: from its staging table), their tiles between
// the SQL expressions first and last ("": unbounded).
func recomputeTilesFrom(i int, wanted, first, last string) string {
	t := tiers.All[i]
	cond := `src.variable_id = w.variable_id AND ` + sourceTime(i) + ` >= w.tile AND ` + sourceTime(i) +
		` < w.tile + INTERVAL '` + interval(t) + `'`
	var tilesBetween string
	if first != "" {
		cond += ` AND ` + sourceTime(i) + ` >= ` + first + ` AND ` + sourceTime(i) + ` < ` + last + ` + INTERVAL '` + interval(t) + `'`
		tilesBetween = ` AND m.tile >= ` + first + ` AND m.tile <= ` + last
	}
	return `WITH wanted AS (
    SELECT DISTINCT w.* FROM ` + wanted + ` AS w(variable_id, tile)` +
		beforeMark(i, "w.variable_id", "w.tile") + `
), fresh (` + tileColumns + `) AS (
    SELECT f.* FROM wanted w CROSS JOIN LATERAL (
` + tileSource(i, cond) + `
    ) f
), emptied AS (
    DELETE FROM ` + t.Table + ` m USING wanted w
    WHERE m.variable_id = w.variable_id AND m.tile = w.tile` + tilesBetween + `
      AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.variable_id = w.variable_id AND f.tile = w.tile)
)
INSERT INTO ` + t.Table + ` AS m (` + tileColumns + `)
SELECT * FROM fresh
ON CONFLICT (variable_id, tile) DO UPDATE
SET n = EXCLUDED.n, sum = EXCLUDED.sum, min = EXCLUDED.min, max = EXCLUDED.max, ks = EXCLUDED.ks, m2 = EXCLUDED.m2,
    first_ts = EXCLUDED.first_ts, first_value = EXCLUDED.first_value, last_ts = EXCLUDED.last_ts,
    last_value = EXCLUDED.last_value, min_ts = EXCLUDED.min_ts, max_ts = EXCLUDED.max_ts,
    area_locf = EXCLUDED.area_locf, area_linear = EXCLUDED.area_linear, increase = EXCLUDED.increase,
    longest_ms = EXCLUDED.longest_ms`
}

// beforeMark is the FROM item and condition that keep, in a statement on tier i's tiles
// (key and tile: SQL text naming a tile's variable and start), only the tiles that end by
// their variable's rollups_until, for callers that did not read the marks.
func beforeMark(i int, key, tile string) string {
	return `, variables cv
WHERE cv.id = ` + key + ` AND ` + tile + ` + INTERVAL '` + interval(tiers.All[i]) + `' <= cv.rollups_until`
}

// sourceTime is the time column of tier i's source rows in a tileSource condition.
func sourceTime(i int) string {
	if i == 0 {
		return "src.ts"
	}
	return "src.tile"
}

// The write path's statements per tier, built once (every write batch sends them).
var (
	addSQL       = perTier(func(i int) string { return addTilesSQL(tiers.All[i].Table) })
	recomputeSQL = perTier(recomputeTilesSQL)
)

func perTier(sql func(i int) string) []string {
	out := make([]string, len(tiers.All))
	for i := range out {
		out[i] = sql(i)
	}
	return out
}

// recomputeQueries recomputes every tier's tiles holding the given rows that end by
// their variable's mark (marks: ms by key), finest first.
func recomputeQueries(rows []Row, marks map[int64]int64) []*pgx.QueuedQuery {
	var qs []*pgx.QueuedQuery
	for i, t := range tiers.All {
		before := rowsBefore(rows, marks, t)
		if len(before) == 0 {
			continue
		}
		vars, tiles := make([]int64, len(before)), make([]time.Time, len(before))
		for j, r := range before {
			vars[j], tiles[j] = r.Variable, time.UnixMilli(t.Floor(r.TS)).UTC()
		}
		qs = append(qs, &pgx.QueuedQuery{SQL: recomputeSQL[i], Arguments: recomputeArgs(vars, tiles)})
	}
	return qs
}

// addQueries adds the rows' rollups (rows all new) to every tier's tiles that end by
// their variable's mark. Once they ran, fixes holds the tiles they left without an
// inside (addTilesSQL), per tier.
func addQueries(rows []Row, marks map[int64]int64) (qs []*pgx.QueuedQuery, fixes interleaved) {
	fixes = make(interleaved, len(tiers.All))
	for i, t := range tiers.All {
		if before := rowsBefore(rows, marks, t); len(before) > 0 {
			q := &pgx.QueuedQuery{SQL: addSQL[i], Arguments: sumTiles(before, t).args()}
			q.Query(func(rows pgx.Rows) error { return fixes.scan(i, rows) })
			qs = append(qs, q)
		}
	}
	return qs, fixes
}

// interleaved are, per tier, the tiles an add left without an inside although their
// values lie within the spread's limits: new dots fell between stored ones.
type interleaved []struct {
	vars  []int64
	tiles []time.Time
}

func (f interleaved) scan(tier int, rows pgx.Rows) error {
	var v int64
	var t time.Time
	_, err := pgx.ForEachRow(rows, []any{&v, &t}, func() error {
		f[tier].vars, f[tier].tiles = append(f[tier].vars, v), append(f[tier].tiles, t)
		return nil
	})
	return err
}

// queries recompute those tiles from the tier below, finest first (a coarser tile
// merges the finer ones, fixed by then): none in the usual write.
func (f interleaved) queries() []*pgx.QueuedQuery {
	var qs []*pgx.QueuedQuery
	for i, t := range f {
		if len(t.vars) > 0 {
			qs = append(qs, &pgx.QueuedQuery{SQL: recomputeSQL[i], Arguments: recomputeArgs(t.vars, t.tiles)})
		}
	}
	return qs
}

// rowsBefore are the rows whose tile of t ends by their variable's mark: all of them, in
// the same slice, when they all do (a load of history).
func rowsBefore(rows []Row, marks map[int64]int64, t tiers.Tier) []Row {
	before := func(r Row) bool { return t.Floor(r.TS)+t.WidthMs() <= marks[r.Variable] }
	if !slices.ContainsFunc(rows, func(r Row) bool { return !before(r) }) {
		return rows
	}
	var out []Row
	for _, r := range rows {
		if before(r) {
			out = append(out, r)
		}
	}
	return out
}

// Exec runs one statement with pgx's $n parameters, in the caller's transaction: a
// pgx.Tx here, bun's for the deletes of variables and devices (pkg/store).
type Exec func(ctx context.Context, sql string, args ...any) error

// execIn runs statements in tx.
func execIn(tx pgx.Tx) Exec {
	return func(ctx context.Context, sql string, args ...any) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	}
}

// DeleteAll removes every value of vars in both layouts and every rollup tile, in
// the caller's transaction (the deletes of variables and devices, pkg/store).
func DeleteAll(ctx context.Context, exec Exec, vars []int64) error {
	if len(vars) == 0 {
		return nil
	}
	for _, table := range RawTables {
		if err := exec(ctx, `DELETE FROM `+table+` WHERE variable_id = ANY($1)`, vars); err != nil {
			return fmt.Errorf("delete %s: %w", table, err)
		}
	}
	return deleteTiles(ctx, exec, vars, Range{})
}

// deleteTiles follows a delete of the values of vars in r (nil bounds are open) in every
// tier, finest first: the tiles inside r lost all their values and are deleted, the tile
// at each closed end only some, and is recomputed from the tier below.
func deleteTiles(ctx context.Context, exec Exec, vars []int64, r Range) error {
	for i, t := range tiers.All {
		cond, ends := tilesInside(t, r)
		args := []any{vars}
		for _, e := range ends {
			args = append(args, e)
		}
		if err := exec(ctx, `DELETE FROM `+t.Table+` WHERE variable_id = ANY($1)`+cond, args...); err != nil {
			return fmt.Errorf("delete %s: %w", t.Table, err)
		}
		if len(ends) == 0 {
			continue
		}
		if err := exec(ctx, recomputeSQL[i], everyPair(vars, ends)...); err != nil {
			return fmt.Errorf("recompute %s: %w", t.Table, err)
		}
	}
	return nil
}

// everyPair is the arguments of recomputeTilesSQL for the tiles ends of every variable.
func everyPair(vars []int64, ends []time.Time) []any {
	var vs []int64
	var ts []time.Time
	for _, e := range ends {
		for _, v := range vars {
			vs, ts = append(vs, v), append(ts, e)
		}
	}
	return recomputeArgs(vs, ts)
}

// tilesInside is the condition on tier t's tiles that lie inside r, its parameters $2
// on being ends: the tiles that hold r's closed ends.
func tilesInside(t tiers.Tier, r Range) (cond string, ends []time.Time) {
	for _, b := range []struct {
		ms     *int64
		inside string
	}{{r.Start, ">"}, {r.End, "<"}} {
		if b.ms != nil {
			ends = append(ends, time.UnixMilli(t.Floor(*b.ms)).UTC())
			cond += fmt.Sprintf(` AND tile %s $%d`, b.inside, len(ends)+1)
		}
	}
	return cond, ends
}
