package querybuilder

import (
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Fill is how E8 fills the buckets that would be null (API.md §20), with pandas'
// semantics over each variable's resampled series.
type Fill string

// The fill methods.
const (
	FillNone     Fill = "none"
	FillZero     Fill = "zero"     // fillna(0)
	FillPrevious Fill = "previous" // ffill(limit)
	FillLinear   Fill = "linear"   // interpolate(method="time", limit, limit_area="inside")
)

// Fills are the accepted fill methods, in the order errors list them.
var Fills = []Fill{FillNone, FillZero, FillPrevious, FillLinear}

// Series says how E8's series are shaped beyond their buckets: Extend, from the bucket
// holding start (when given) to the one holding end (or now()) rather than from the
// first to the last non-empty one; Fill and FillLimit (0: none), how empty buckets are
// filled. An extended series filled by previous starts from the variable's last value
// before start, as if it were the bucket before the first.
type Series struct {
	Extend    bool
	Fill      Fill
	FillLimit int
}

// seriesTail turns buckets (ord, key, value: the non-empty buckets) into each
// variable's series, empty buckets valued empty then filled, and the statement's
// output rows.
func seriesTail(empty string, g grid, r ResampleRequest) sq.Sqlizer {
	src, head := "buckets", sq.Expr("")
	if r.Extend {
		src, head = "spanned", spannedCTE(empty, g, r.Start, r.End)
	}
	out, fill := "filled", any("")
	if f := fillCTE(r); f != nil {
		out, fill = "refilled", f
	}
	return sq.ConcatExpr(head, sq.Expr(`,
gapped AS (
  SELECT ord FROM `+src+` GROUP BY ord HAVING min(key) + (count(*) - 1) * ? <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, `+empty+` AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM `+src+` WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + ?, b.next - ?, ?) AS k(key)
  WHERE b.next > b.key + ?
),
filled AS (
  SELECT g.ord, ? AS label, g.value
  FROM (SELECT ord, key, value FROM `+src+` UNION ALL SELECT ord, key, value FROM gaps) g
)`, g.step, g.step, g.step, g.step, g.step, g.label), fill, `
`+unknownIDs+`
UNION ALL
SELECT ord, `+epochMillis("label")+`, value FROM `+out+`
ORDER BY 1, 2 DESC`)
}

// spannedCTE is buckets with the buckets holding the range's ends added (valued
// empty) where a variable has none there.
func spannedCTE(empty string, g grid, start, end *time.Time) sq.Sqlizer {
	var at []any
	for _, t := range []*time.Time{start, end} {
		switch {
		case t != nil:
			at = append(at, sq.Expr("(?::timestamptz)", *t))
		case start != nil:
			at = append(at, sq.Expr("(now())"))
		}
	}
	if len(at) == 0 {
		return sq.Expr(",\nspanned AS (\n  SELECT ord, key, value FROM buckets\n)")
	}
	values := []any{at[0]}
	if len(at) > 1 {
		values = append(values, ", ", at[1])
	}
	return sq.ConcatExpr(",\nspanned AS (\n  SELECT ord, key, value FROM buckets\n  UNION ALL\n  SELECT vars.ord, e.key, "+empty+"\n  FROM vars\n  CROSS JOIN (SELECT DISTINCT ",
		g.key, " AS key FROM (VALUES ", sq.ConcatExpr(values...), ") pts(ts)) e\n  WHERE e.key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM buckets b WHERE b.ord = vars.ord AND b.key = e.key)\n)")
}

// fillCTE is refilled: filled with its null values filled (nil: no fill). Each
// series' buckets are numbered into runs, a run being a value and the nulls after it
// (grp: the values up to the bucket, counted by window), so ffill is the run's first
// value within limit buckets of it; interpolation also needs the next run's value and
// label (the same count backwards).
func fillCTE(r ResampleRequest) sq.Sqlizer {
	within := sq.Expr("true")
	if r.FillLimit > 0 {
		within = sq.Expr("f.run <= ?", r.FillLimit)
	}
	var value sq.Sqlizer
	switch r.Fill {
	case FillZero:
		value = sq.Expr("coalesce(f.value, 0)")
	case FillPrevious:
		value = sq.ConcatExpr("coalesce(f.value, CASE WHEN ", within, " THEN f.prev END)")
	case FillLinear:
		value = sq.ConcatExpr("coalesce(f.value, CASE WHEN ", within, ` AND f.grp > 0 THEN f.prev + (f.next - f.prev) * (`+
			epochMillis("f.label")+" - "+epochMillis("f.prev_label")+")::float8 / ("+
			epochMillis("f.next_label")+" - "+epochMillis("f.prev_label")+") END)")
	default:
		return nil
	}
	seed, seedRun, seeded := sq.Expr(""), "", r.Fill == FillPrevious && r.Extend && r.Start != nil
	if seeded {
		// the last value before start stands for the bucket before the first
		seed = sq.ConcatExpr(",\nseed AS (\n  SELECT vars.ord, b.value FROM vars CROSS JOIN LATERAL ", beforePoint("vars.id", *r.Start), " b\n)")
		seedRun = " + CASE WHEN g.grp = 0 THEN 1 ELSE 0 END"
	}
	prev := "first_value(g.value) OVER run"
	if seeded {
		prev = "CASE WHEN g.grp = 0 THEN (SELECT s.value FROM seed s WHERE s.ord = g.ord) ELSE " + prev + " END"
	}
	return sq.ConcatExpr(seed, `,
refilled AS (
  SELECT f.ord, f.label, `, value, ` AS value
  FROM (
    SELECT g.*, `+prev+` AS prev, first_value(g.label) OVER run AS prev_label,
           row_number() OVER run - 1`+seedRun+` AS run,
           first_value(g.value) OVER back AS next, first_value(g.label) OVER back AS next_label
    FROM (
      SELECT filled.*, count(value) OVER (PARTITION BY ord ORDER BY label) AS grp,
             count(value) OVER (PARTITION BY ord ORDER BY label DESC) AS grp_back
      FROM filled
    ) g
    WINDOW run AS (PARTITION BY g.ord, g.grp ORDER BY g.label),
           back AS (PARTITION BY g.ord, g.grp_back ORDER BY g.label DESC)
  ) f
)`)
}
