package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/sensordata/sensorapi/pkg/tiers"
)

// RetileRange recomputes every tier's tiles of one variable that hold timestamps in
// [from, to] (ms, inclusive) from "values", finest first, in the caller's transaction:
// for writers that replaced a range of values by other means than the pipeline (the
// synthetic variables' upkeep, pkg/synthetic). The caller holds the variable's row
// lock, as writers do before their rollups.
func RetileRange(ctx context.Context, exec Exec, key, from, to int64) error {
	from, to = max(from, 0), min(to, maxTimestamp)
	for i, t := range tiers.All {
		lo := time.UnixMilli(t.Floor(from)).UTC()
		hi := time.UnixMilli(t.Floor(to)).UTC().Add(t.Width)
		if err := exec(ctx, `DELETE FROM `+t.Table+` WHERE variable_id = $1 AND tile >= $2 AND tile < $3`, key, lo, hi); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
		cond := `src.variable_id = $1 AND ` + sourceTime(i) + ` >= $2 AND ` + sourceTime(i) + ` < $3`
		if err := exec(ctx, `INSERT INTO `+t.Table+` (`+tileColumns+`) `+tileSource(i, cond), key, lo, hi); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
	}
	return nil
}
