package querybuilder

import (
	"fmt"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// Count, sum, mean, min, max, std, first and last of a range add up from parts, so the
// compiler answers them from summary rows: whole tiles of the rollup tiers (querybuilder/tiers,
// kept exact by the write path) wherever they fit, and raw values only where a range
// edge cuts a minute. A range is covered coarsest first: whole days in its middle,
// then quarters, then minutes towards its edges, then the raw values of the partial
// minutes at both ends. A year is then about 365 + 2·95 + 2·14 rows, not 3 million.
//
// Statistics and aggregation (E7, E9) ask about a UTC range only: every tier fits.
// A resample bucket (E8) is a calendar interval of a time zone: a tier fits only where
// its tiles never straddle a bucket edge (tiers.FitZone, checked again against the
// database's own tz data when the statement runs: zoneCheck).

// summaryColumns are all the columns of a summary row after variable_id and ts. A
// statement that needs fewer asks for those only (a resample's mean reads n and sum):
// every column a row carries costs its branch a projection.
var summaryColumns = []string{"n", "sum", "min", "max", "ks", "m2", "first_ts", "first_value", "last_ts", "last_value", "min_ts", "max_ts"}

// rawColumns turn a raw value (columns prefix.ts, prefix.value) into a summary row of
// the columns cols: its own min, so its shifted sum and spread are 0 (none beyond
// ±1e150, as for tiles).
func rawColumns(prefix string, cols []string) string {
	v, t := prefix+"value", prefix+"ts"
	out := []string{prefix + "variable_id", t + " AS ts"}
	for _, c := range cols {
		var e string
		switch c {
		case "n":
			e = "1"
		case "sum", "min", "max", "first_value", "last_value":
			e = v
		case "ks", "m2":
			// no spread beyond ±1e150 or below 1e-100 (pkg/values spreadLimit, spreadFloor)
			e = "CASE WHEN abs(" + v + ") <= 1e150 AND (" + v + " = 0 OR abs(" + v + ") >= 1e-100) THEN 0::float8 END"
		case "first_ts", "last_ts", "min_ts", "max_ts":
			e = t
		case "area_locf", "area_linear", "increase": // a single dot: no signal inside
			e = "0::float8"
		default: // the compiler's own lists name the columns: a typo must not read as ts
			panic("querybuilder: unknown summary column " + c)
		}
		out = append(out, e+" AS "+c)
	}
	return strings.Join(out, ", ")
}

// tileColumns select a tile as a summary row of the columns cols (ts = its start).
func tileColumns(cols []string) string {
	out := []string{"m.variable_id", "m.tile AS ts"}
	for _, c := range cols {
		out = append(out, "m."+c)
	}
	return strings.Join(out, ", ")
}

// nowMargin: without an end a range runs to the database's now(). The tiles are read
// up to the service's clock minus this margin, the rest raw up to now(), so that clocks
// apart by less than it still give the database's answer exactly.
const nowMargin = 5 * time.Minute

// cover is how a range splits over the tiers: whole tiles of tiers.All[i] in
// [lo[i], hi[i]), nested (a coarser tier's span lies inside a finer one's), a tier
// with no whole tile (or not usable) collapsed to lo = hi. Each tier reads its span less
// the next coarser tier's; raw values fill [start, lo[0]) and [hi[0], end].
type cover struct {
	start  time.Time  // the range's first instant (epoch 0 when none was given)
	end    *time.Time // its last, inclusive (nil: the database's now())
	lo, hi []time.Time
}

// TierBounds are what the service knows of the stored tiers when it compiles a read.
// The zero value knows of no limit: the psql form, and reads of stored history.
type TierBounds struct {
	// RawHorizon, when retention removed the raw values before it (API.md §16): a
	// range end before it is rounded outward to its minute, answered by the tiers.
	RawHorizon *time.Time
	// RollupsUntil: every tile that ends by it is complete; later ones may not be yet
	// (the write path leaves fresh values to a job, pkg/ingest rollupmark.go), so the
	// cover reads raw values after it.
	RollupsUntil *time.Time
}

// newCover splits [start, end] over the first usable tiers (0: raw values only), up to
// b.RollupsUntil. An end before the raw horizon (retention removed the values before
// it) is rounded outward to its minute: the tiers answer for it (API.md §16).
func newCover(start, end *time.Time, usable int, b TierBounds) cover {
	horizon := b.RawHorizon
	s, e := int64(0), time.Now().Add(-nowMargin).UnixMilli() // no start: from the first value (timestamps are ≥ 0)
	if start != nil {
		s = start.UnixMilli()
	}
	if end != nil {
		e = end.UnixMilli() + 1 // end is inclusive to the millisecond
	}
	if horizon != nil && usable > 0 {
		h := horizon.UnixMilli()
		if s < h {
			s = tiers.Minutes.Floor(s)
		}
		if e <= h {
			e = tiers.Minutes.Ceil(e)
		}
	}
	c := cover{start: time.UnixMilli(s).UTC(), end: end}
	prev, collapsed := s, false
	for i, t := range tiers.All {
		lo, hi := t.Ceil(s), t.Floor(e)
		if b.RollupsUntil != nil {
			hi = min(hi, t.Floor(b.RollupsUntil.UnixMilli()))
		}
		if collapsed || i >= usable || lo >= hi {
			lo, hi, collapsed = prev, prev, true
		}
		c.lo, c.hi = append(c.lo, time.UnixMilli(lo).UTC()), append(c.hi, time.UnixMilli(hi).UTC())
		prev = lo
	}
	return c
}

// notes describe the cover for explain answers and `sensorapi compile`: which tiers
// are read over which spans, coarsest first (a finer tier reads its span less the
// coarser one's: the edges).
func (c cover) notes() []string {
	var out []string
	last := len(tiers.All) - 1
	span := func(lo, hi time.Time) string {
		return lo.Format(time.RFC3339) + " to " + hi.Format(time.RFC3339)
	}
	for i := last; i >= 0; i-- {
		var parts []string
		if i == last {
			if c.lo[i].Before(c.hi[i]) {
				parts = append(parts, span(c.lo[i], c.hi[i]))
			}
		} else {
			if c.lo[i].Before(c.lo[i+1]) {
				parts = append(parts, span(c.lo[i], c.lo[i+1]))
			}
			if c.hi[i+1].Before(c.hi[i]) {
				parts = append(parts, span(c.hi[i+1], c.hi[i]))
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s: whole tiles from %s", tiers.All[i].Table, strings.Join(parts, " and from ")))
		}
	}
	if len(out) == 0 {
		return []string{`raw "values" only: the range holds no whole minute`}
	}
	return append(out, `raw "values": the partial minutes at both ends`)
}

// summaries selects summary rows (variable_id, ts and the columns cols of
// summaryColumns) that together hold exactly the values in the range of the variables
// whose key matches "= key" (key: SQL text, a column of an outer row or ANY of an
// array): a row per tile of the cover, a row per raw value at its edges. The branches
// exclude each other by time, and each is one range scan of an index on (variable,
// time) with constant bounds, so TimescaleDB excludes the chunks outside them when it
// plans the statement. The text is the same for every range: empty spans are empty
// bounds.
//
// Raw values are in two layouts (sql/…_values_packed.up.sql): rows of "values", and
// packed days, which have no minute tiles. So every raw span reads both, and the packed
// dots are also read over every span of minute tiles (with the raw edge beside it).
func summaries(key string, c cover, cols []string) sq.Sqlizer {
	return summariesUsing(key, c, cols, nil)
}

// tileUse restricts the tiles a read takes to those where cond holds (SQL on the tile
// m.*); for the others it reads their raw values (both layouts) as summary rows.
type tileUse struct {
	cond   sq.Sqlizer
	others []any // the SELECTs of the tiles not taken, per span (tileRows)
}

// summariesUsing is summaries with every tile span read through use (nil: every tile;
// use collects the spans: one use per statement).
func summariesUsing(key string, c cover, cols []string, use *tileUse) sq.Sqlizer {
	last := len(tiers.All) - 1
	upTo, packedEnd := sq.Expr("x.ts <= now()"), sq.Expr("now()")
	if c.end != nil {
		upTo, packedEnd = sq.Expr("x.ts <= ?", *c.end), sq.Expr("?", *c.end)
	}
	// Packed days have no minute tiles: their dots are read over each raw edge and the
	// minute span beside it at once, one read a side (each packed_dots cost the planner
	// ~0.5 ms, more than most of these statements take to run).
	parts := []any{
		rowSummaries(key, sq.Expr("x.ts >= ? AND x.ts < ?", c.start, c.lo[0]), cols),
		packedSummaries(key, sq.Expr("x.ts >= ? AND x.ts < ?", c.start, c.lo[1]), halfOpen(c.start, c.lo[1]), cols),
		rowSummaries(key, sq.ConcatExpr(sq.Expr("x.ts >= ? AND ", c.hi[0]), upTo), cols),
		packedSummaries(key, sq.ConcatExpr(sq.Expr("x.ts >= ? AND ", c.hi[1]), upTo), sq.ConcatExpr(sq.Expr("?, ", c.hi[1]), packedEnd), cols),
	}
	for i, t := range tiers.All {
		if i == last {
			parts = append(parts, use.tileRows(key, t, c.lo[i], c.hi[i], cols))
		} else {
			parts = append(parts, use.tileRows(key, t, c.lo[i], c.lo[i+1], cols), use.tileRows(key, t, c.hi[i+1], c.hi[i], cols))
		}
	}
	if use != nil {
		parts = append(parts, use.rawOfOthers(cols))
	}
	var b []any
	for i, p := range parts {
		if i > 0 {
			b = append(b, "\n    UNION ALL\n    ")
		}
		b = append(b, p)
	}
	return sq.ConcatExpr(b...)
}

// tileRows are the tiles of t in [lo, hi).
func tileRows(key string, t tiers.Tier, lo, hi time.Time, cols []string) sq.Sqlizer {
	return sq.Expr(`SELECT `+tileColumns(cols)+`
    FROM `+t.Table+` m
    WHERE m.variable_id = `+key+` AND m.tile >= ? AND m.tile < ?`, lo, hi)
}

// tileRows are the tiles of t in [lo, hi) that u takes (all of them for a nil u); u
// remembers the span for its raw values of the others (rawOfOthers).
func (u *tileUse) tileRows(key string, t tiers.Tier, lo, hi time.Time, cols []string) sq.Sqlizer {
	if u == nil {
		return tileRows(key, t, lo, hi, cols)
	}
	u.others = append(u.others, sq.ConcatExpr(sq.Expr(`SELECT m.variable_id, m.tile AS lo, m.tile + `+width(t)+` AS hi
        FROM `+t.Table+` m
        WHERE m.variable_id = `+key+` AND m.tile >= ? AND m.tile < ? AND NOT `, lo, hi), u.cond))
	return sq.ConcatExpr(tileRows(key, t, lo, hi, cols), " AND ", u.cond)
}

// rawOfOthers is the summary rows of the raw values of the tiles that u did not take in
// the spans it was asked for: the rows of "values" in each such tile and its packed dots
// (none in a minute tile: packed days have none), one LATERAL for all of them (a branch
// per span cost the planner a scan of every chunk of both layouts each: twice the
// planning time).
func (u *tileUse) rawOfOthers(cols []string) sq.Sqlizer {
	parts := []any{`SELECT ` + rawColumns("x.", cols) + `
    FROM (
        `}
	for i, o := range u.others {
		if i > 0 {
			parts = append(parts, "\n        UNION ALL\n        ")
		}
		parts = append(parts, o)
	}
	return sq.ConcatExpr(append(parts, `
    ) u
    CROSS JOIN LATERAL (
      SELECT r.variable_id, r.ts, r.value FROM "values" r
      WHERE r.variable_id = u.variable_id AND r.ts >= u.lo AND r.ts < u.hi
      UNION ALL
      SELECT d.variable_id, d.ts, d.value FROM packed_dots(u.lo, u.hi - INTERVAL '1 microsecond') d
      WHERE d.variable_id = u.variable_id
    ) x`)...)
}

// width is a tier's width as an SQL interval.
func width(t tiers.Tier) string {
	return fmt.Sprintf("INTERVAL '%d seconds'", int64(t.Width/time.Second))
}

// rawSummaries is the summary rows of the raw values of key with a timestamp in
// range (SQL conditions on x.ts), of both layouts: the packed dots are read between
// the bounds packed (packed_dots' first and last, inclusive), less those outside range.
func rawSummaries(key string, cond, packed sq.Sqlizer, cols []string) sq.Sqlizer {
	return sq.ConcatExpr(rowSummaries(key, cond, cols), "\n    UNION ALL\n    ", packedSummaries(key, cond, packed, cols))
}

// rowSummaries is the summary rows of the rows of "values" of key where cond holds.
func rowSummaries(key string, cond sq.Sqlizer, cols []string) sq.Sqlizer {
	return sq.ConcatExpr(`SELECT `+rawColumns("x.", cols)+`
    FROM "values" x
    WHERE x.variable_id = `+key+` AND `, cond)
}

// packedSummaries is the summary rows of the packed dots of key between the bounds
// packed where cond holds.
func packedSummaries(key string, cond, packed sq.Sqlizer, cols []string) sq.Sqlizer {
	return sq.ConcatExpr(`SELECT `+rawColumns("x.", cols)+`
    FROM packed_dots(`, packed, `) x
    WHERE x.variable_id = `+key+` AND `, cond)
}

// halfOpen is [lo, hi) as packed_dots' inclusive bounds (timestamps are whole
// microseconds); an empty span gives last < first, which reads no packed day.
func halfOpen(lo, hi time.Time) sq.Sqlizer {
	return sq.Expr("?, ?", lo, hi.Add(-time.Microsecond))
}
