package querybuilder

import (
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Count, sum, mean, min and max of a range add up from parts, so the compiler reads
// the table value_minutes (per-minute count, sum, min and max of each variable, kept
// exact by the write path) for the whole minutes of a range and raw values only for
// its partial first and last minute: one row a minute instead of one a value.
//
// A resample bucket edge is a local midnight, or a whole number of minutes from one,
// so every minute lies inside one bucket as long as local time differs from UTC by
// whole minutes. Every IANA zone does from rollupEpoch on: the last zone with seconds
// in its offset, Africa/Monrovia (-0:44:30), changed on 1972-01-07. Values before
// rollupEpoch are always read raw.
var rollupEpoch = time.Date(1973, 1, 1, 0, 0, 0, 0, time.UTC)

// summaryColumns turn a raw value (column prefix.value) into a summary row: its own
// min, so its shifted sum and spread are 0 (none beyond ±1e150, as for rollups).
func summaryColumns(prefix string) string {
	v := prefix + "value"
	none := "CASE WHEN abs(" + v + ") <= 1e150 THEN 0::float8 END"
	return "1 AS n, " + v + " AS sum, " + v + " AS min, " + v + " AS max, " + none + " AS ks, " + none + " AS m2"
}

// summaries selects rows (ts, n, sum, min, max, ks, m2) that together hold exactly the values
// of the variable whose key is the SQL expression key in [start, end] (the range rules
// of inRange): a rollup row (ts = its minute) per whole minute from rollupEpoch on,
// and a row per raw value (n = 1) in the rest of the range. The branches exclude each
// other by ts, and each is one range scan of an index on (variable, time).
func summaries(key string, start, end *time.Time) sq.Sqlizer {
	lo := rollupEpoch
	if start != nil {
		// the first whole minute
		s := start.UTC().Truncate(time.Minute)
		if s.Before(*start) {
			s = s.Add(time.Minute)
		}
		if s.After(lo) {
			lo = s
		}
	}
	// hi: the end of the last whole minute; end is inclusive to the millisecond. When
	// hi <= lo (a range inside a minute, or before rollupEpoch) the rollup branch is
	// empty and the raw ones meet at lo: the text stays the same for every range, so it
	// depends on the request's shape only, never on its values.
	hi := sq.Expr("time_bucket(INTERVAL '1 minute', now())")
	if end != nil {
		hi = sq.Expr("?::timestamptz", end.UTC().Add(time.Millisecond).Truncate(time.Minute))
	}
	return sq.ConcatExpr(
		sq.Expr(`SELECT m.minute AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2
    FROM value_minutes m
    WHERE m.variable_id = `+key+` AND m.minute >= ? AND m.minute < `, lo), hi, `
    UNION ALL
    `, rawSummaries(key, start, end, sq.Expr("x.ts < ?", lo)), `
    UNION ALL
    `, rawSummaries(key, start, end, sq.ConcatExpr(sq.Expr("x.ts >= greatest(?::timestamptz, ", lo), hi, ")")))
}

// rawSummaries is the summary rows of the raw values in range that also satisfy cond.
func rawSummaries(key string, start, end *time.Time, cond sq.Sqlizer) sq.Sqlizer {
	return sq.ConcatExpr(`SELECT x.ts, `+summaryColumns("x.")+`
    FROM "values" x
    WHERE x.variable_id = `+key+` AND `, inRange("x.ts", start, end), " AND ", cond)
}
