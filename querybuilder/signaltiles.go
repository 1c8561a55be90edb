package querybuilder

import (
	sq "github.com/Masterminds/squirrel"
)

// The tile path of the time-aware aggregations. Every tile keeps its first and last dot
// and what the signal between its own dots adds up to (its area held and interpolated,
// its counter increase, its longest interval: sql/20261204000001_tile_signal.up.sql), so a
// range reads as a sequence of pieces ordered in time: whole tiles of the cover, and raw
// values (a piece of one dot, nothing inside) where no tile fits. The signal between
// pieces is the interval from one piece's last dot to the next one's first, computed as
// the raw path computes an interval between two values; a piece's inside is added as it
// is. With raw values only this is the raw path itself, so the two agree by
// construction, and a year at 10 s reads about 35,000 quarters instead of 3 million
// values.
//
// A tile is taken only when its inside holds no gap: its longest interval within
// max_gap (any, without max_gap) and its inside known (NULL when a value lies beyond the
// spread's limits); for the others the raw values of the tile are read. Tiles end by the
// marks (TierBounds.RollupsUntil): the raw values after them are read as such.

// pieceCols are the summary columns a piece reads, its inside's area of method s.
func pieceCols(s Signal) []string {
	area := "area_locf"
	if s.Linear {
		area = "area_linear"
	}
	return []string{"n", "first_ts", "first_value", "last_ts", "last_value", area, "increase"}
}

// tileUseFor is the tiles the signal s may take: those whose inside is known, and with
// max_gap, whose longest interval is within it.
func tileUseFor(s Signal) *tileUse {
	if s.MaxGap > 0 {
		return &tileUse{cond: sq.Expr("coalesce(m.longest_ms::float8 <= ?::float8, false)", s.MaxGap*1000)}
	}
	return &tileUse{cond: sq.Expr("m.longest_ms IS NOT NULL")}
}

// hasTiles tells whether the cover reads any tile.
func (c cover) hasTiles() bool {
	for i := range c.lo {
		if c.lo[i].Before(c.hi[i]) {
			return true
		}
	}
	return false
}

// signalCover is the cover of a time-aware read of range r over the first usable tiers
// (nil: raw values only, when no tile fits or there is no range). The raw horizon is not
// the signal's: it reads the range as asked.
func signalCover(r signalRange, usable int, b TierBounds) *cover {
	if r.start == nil && r.end == nil {
		return nil
	}
	b.RawHorizon = nil
	c := newCover(r.start, r.end, usable, b)
	if !c.hasTiles() {
		return nil
	}
	return &c
}

// signalPieces are the rows (variable_id, ts, value: the first dot; lt, lv: the last;
// n, a0: the inside's area, inc0: its increase, inr) of the variables keyed by ids over
// the cover c, guarded by zonecheck (E8), and the value just before the range and the
// one just after it as pieces of one dot out of range.
func signalPieces(ids string, r signalRange, s Signal, c cover, guarded bool) sq.Sqlizer {
	cols := pieceCols(s)
	return sq.ConcatExpr(`    SELECT p.variable_id, p.first_ts AS ts, p.first_value AS value, p.last_ts AS lt, p.last_value AS lv,
           p.n, p.`+cols[5]+` AS a0, p.increase AS inc0, true AS inr
    FROM (
    `, rangePointsUsing(c, guarded, r.start, r.end, cols, tileUseFor(s), ids), `
    ) p
    UNION ALL
    SELECT e.variable_id, e.ts, e.value, e.ts, e.value, 1, 0::float8, 0::float8, e.inr
    `, edgePoints(ids, r))
}

// signalSource is the points (raw path) or the pieces (tile path, pieces true) of the
// variables keyed by ids over r.
func signalSource(ids string, r signalRange, s Signal, c *cover, guarded bool) (src sq.Sqlizer, pieces bool) {
	if c == nil {
		return signalPoints(ids, r), false
	}
	return signalPieces(ids, r, s, *c, guarded), true
}

// signalNoteOf is signalNote, with the tiers the tile path reads.
func signalNoteOf(s Signal, c *cover) []string {
	if c == nil {
		return []string{signalNote(s)}
	}
	return append([]string{signalTileNote(s)}, c.notes()...)
}

// signalTileNote is the explain note of the tile path.
func signalTileNote(s Signal) string {
	gap := "whose inside is known"
	if s.MaxGap > 0 {
		gap = "whose longest interval between values is within max_gap (the others: their raw values)"
	}
	return "time-aware over tiles: whole tiles " + gap + ", raw values elsewhere, the intervals between them and the value before and after the range; " +
		signalNote(s)
}
