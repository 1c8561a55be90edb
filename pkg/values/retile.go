package values

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// retileRange recomputes every tier's tiles of one variable that hold timestamps in
// [from, to] (ms, inclusive) from "values", finest first, in the caller's transaction:
// for ReplaceRange, which replaced a range of values by other means than a batch of
// rows. The caller holds the variable's row lock, as writers do before their rollups.
func retileRange(ctx context.Context, exec Exec, key, from, to int64) error {
	from, to = max(from, 0), min(to, MaxTimestamp)
	for i, t := range tiers.All {
		lo := time.UnixMilli(t.Floor(from)).UTC()
		hi := time.UnixMilli(t.Floor(to)).UTC().Add(t.Width)
		if err := exec(ctx, `DELETE FROM `+t.Table+` m WHERE variable_id = $1 AND tile >= $2 AND tile < $3`+
			outsidePackedDays(i, "m"), key, lo, hi); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
		cond := `src.variable_id = $1 AND ` + sourceTime(i) + ` >= $2 AND ` + sourceTime(i) + ` < $3`
		if err := exec(ctx, `INSERT INTO `+t.Table+` (`+tileColumns+`)
SELECT f.* FROM (`+tileSource(i, cond)+`) AS f(`+tileColumns+`) WHERE true`+outsidePackedDays(i, "f"), key, lo, hi); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
	}
	return nil
}

// outsidePackedDays is the condition (" AND …", or "" for the finest tier) that the
// tile of table alias a (a coarser tier's: within one UTC day) lies outside every packed
// day of its variable. A packed day has no rows and no minute tiles, so its coarser
// tiles come from its packed dots (PackDay) and were left alone by the write; a retile
// from the tiers below would drop them.
func outsidePackedDays(i int, a string) string {
	if i == 0 {
		return ""
	}
	return ` AND NOT EXISTS (SELECT FROM values_packed p WHERE p.variable_id = ` + a + `.variable_id
    AND p.day = time_bucket(INTERVAL '1 day', ` + a + `.tile))`
}

// deleteRangesSQL deletes the tiles of tier i in the (variable, [lo, hi)) ranges ($1,
// $2, $3), but those of packed days (outsidePackedDays).
func deleteRangesSQL(i int) string {
	return `DELETE FROM ` + tiers.All[i].Table + ` m USING unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
WHERE m.variable_id = w.variable_id AND m.tile >= w.lo AND m.tile < w.hi` + outsidePackedDays(i, "m")
}

// retileRanges is retileRange of many (variable, [from, to]) ranges at once, tiers
// from the first on (a history import's tiler may have built the finest), two
// statements per tier whatever their number: Replace recomputes the ranges of many
// variables at once. A variable's ranges may touch or overlap
// (their tiles are merged first, tier by tier); the caller holds the variables' row
// locks.
func retileRanges(ctx context.Context, exec Exec, first int, keys, froms, tos []int64) error {
	if len(keys) == 0 {
		return nil
	}
	for i := first; i < len(tiers.All); i++ {
		t := tiers.All[i]
		type span struct{ key, lo, hi int64 } // tiles [lo, hi)
		spans := make([]span, 0, len(keys))
		for j, k := range keys {
			from, to := max(froms[j], 0), min(tos[j], MaxTimestamp)
			if from > to {
				continue
			}
			spans = append(spans, span{k, t.Floor(from), t.Floor(to) + t.WidthMs()})
		}
		slices.SortFunc(spans, func(a, b span) int {
			if c := cmp.Compare(a.key, b.key); c != 0 {
				return c
			}
			return cmp.Compare(a.lo, b.lo)
		})
		var ks []int64
		var los, his []time.Time
		for _, s := range spans {
			if n := len(ks); n > 0 && ks[n-1] == s.key && s.lo <= his[n-1].UnixMilli() {
				his[n-1] = time.UnixMilli(max(s.hi, his[n-1].UnixMilli())).UTC()
				continue
			}
			ks, los, his = append(ks, s.key), append(los, time.UnixMilli(s.lo).UTC()), append(his, time.UnixMilli(s.hi).UTC())
		}
		if len(ks) == 0 {
			return nil
		}
		if err := exec(ctx, deleteRangesSQL(i), ks, los, his); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
		cond := `src.variable_id = w.variable_id AND ` + sourceTime(i) + ` >= w.lo AND ` + sourceTime(i) + ` < w.hi`
		if err := exec(ctx, `INSERT INTO `+t.Table+` (`+tileColumns+`)
SELECT f.* FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
CROSS JOIN LATERAL (`+tileSource(i, cond)+`) AS f(`+tileColumns+`) WHERE true`+outsidePackedDays(i, "f"), ks, los, his); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
	}
	return nil
}

// recomputeTilesAt recomputes, finest tier first, every tile holding one of the
// (variable, timestamp ms) pairs — each tile once — and removes those left empty: for
// writers that know which values they changed (Replace). The caller holds the
// variables' row locks.
func recomputeTilesAt(ctx context.Context, exec Exec, vars, ts []int64) error {
	if len(vars) == 0 {
		return nil
	}
	for i, t := range tiers.All {
		type tile struct{ v, at int64 }
		seen := make(map[tile]bool, len(vars))
		vs, tiles := make([]int64, 0, len(vars)), make([]time.Time, 0, len(vars))
		for j, v := range vars {
			k := tile{v, t.Floor(ts[j])}
			if !seen[k] {
				seen[k] = true
				vs, tiles = append(vs, v), append(tiles, time.UnixMilli(k.at).UTC())
			}
		}
		if err := exec(ctx, recomputeSQL[i], recomputeArgs(vs, tiles)...); err != nil {
			return fmt.Errorf("recompute %s: %w", t.Table, err)
		}
	}
	return nil
}
