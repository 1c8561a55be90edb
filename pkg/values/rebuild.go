package values

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// RebuildTiers recomputes every variable's rollup tiers from since on (the zero time:
// all of them) from "values", one variable per transaction under the same lock writers
// take, so it can run while the service writes. It repairs rollups that something
// outside the write path left behind: values written by a binary older than the tiers
// during a rolling upgrade, or rows loaded into "values" by hand. progress, when not
// nil, is called after each variable.
func (s *Store) RebuildTiers(ctx context.Context, since time.Time, progress func(done, total int)) error {
	ids, err := s.variableKeys(ctx)
	if err != nil {
		return fmt.Errorf("rebuild rollup tiers: %w", err)
	}
	for i, id := range ids {
		if err := s.RebuildVariable(ctx, id, since); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return nil
}

// rebuildFrom is where a rebuild from since starts: the coarsest tile holding it, so
// that every tier is rebuilt over whole tiles.
func rebuildFrom(since time.Time) time.Time {
	coarsest := tiers.All[len(tiers.All)-1]
	return time.UnixMilli(coarsest.Floor(since.UnixMilli())).UTC()
}

// RebuildVariable recomputes one variable's tiers from the day holding since on, finest
// first, in one transaction under the writers' lock.
func (s *Store) RebuildVariable(ctx context.Context, id int64, since time.Time) error {
	since = rebuildFrom(since)
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// a variable deleted meanwhile locks no row: its values and rollups are gone
		if _, err := tx.Exec(ctx, `SELECT FROM variables WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
			return err
		}
		for i, t := range tiers.All {
			if _, err := tx.Exec(ctx, `DELETE FROM `+t.Table+` WHERE variable_id = $1 AND tile >= $2`, id, since); err != nil {
				return fmt.Errorf("%s: %w", t.Table, err)
			}
			cond := `src.variable_id = $1 AND ` + sourceTime(i) + ` >= $2`
			if _, err := tx.Exec(ctx, `INSERT INTO `+t.Table+` (`+tileColumns+`) `+tileSource(i, cond), id, since); err != nil {
				return fmt.Errorf("%s: %w", t.Table, err)
			}
			if i == 1 { // packed days have no minute tiles: their quarters come from their dots
				packed := rawTileSQL(interval(t), `packed_values(ARRAY[$1::bigint], $2, 'infinity') x`, `true`)
				if _, err := tx.Exec(ctx, `INSERT INTO `+t.Table+` (`+tileColumns+`) `+packed, id, since); err != nil {
					return fmt.Errorf("%s of packed days: %w", t.Table, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild rollup tiers of variable %d: %w", id, err)
	}
	return nil
}

// Mismatch is a tile whose rollup differs from its values (N: raw count, Rolled: the
// tile's n; nil where there is none).
type Mismatch struct {
	Variable  int64
	Table     string
	Tile      time.Time
	N, Rolled *int32
}

// checkSource is what tier i summarises: the finest tier the rows of "values" only
// (packed days have no minute tiles), the coarser ones both layouts.
func checkSource(i int) string {
	if i == 0 {
		return rowsSource
	}
	return bothSource
}

// checkTilesSQL compares one variable's tiles of tier i from since ($2) on with its
// values, every column (checkedTiles). Sums and spreads are added up batch by batch on the write path
// and merged across tiers, so they may differ from a fresh computation in the last
// bits: compared relatively.
func checkTilesSQL(i int) string {
	t := tiers.All[i]
	return `SELECT coalesce(r.tile, m.tile), r.n, m.n
FROM (` + rawTileSQL(interval(t), checkSource(i), `x.variable_id = $1 AND x.ts >= $2`) + `) AS r(variable_id, tile, n, sum, min, max, ks, m2,
      first_ts, first_value, last_ts, last_value, min_ts, max_ts, area_locf, area_linear, increase, longest_ms)
FULL JOIN (SELECT * FROM ` + t.Table + ` WHERE variable_id = $1 AND tile >= $2) m USING (tile)
WHERE ` + checkedTiles(i) + `(r.n IS DISTINCT FROM m.n OR r.min IS DISTINCT FROM m.min OR r.max IS DISTINCT FROM m.max
   OR r.first_ts IS DISTINCT FROM m.first_ts OR r.first_value IS DISTINCT FROM m.first_value
   OR r.last_ts IS DISTINCT FROM m.last_ts OR r.last_value IS DISTINCT FROM m.last_value
   OR r.min_ts IS DISTINCT FROM m.min_ts OR r.max_ts IS DISTINCT FROM m.max_ts
   OR abs(r.sum - m.sum) > 1e-9 * greatest(abs(r.sum), abs(m.sum), 1)
   OR (r.m2 IS NULL) <> (m.m2 IS NULL)
   OR abs(r.m2 - m.m2) > 1e-9 * greatest(r.m2, m.m2) + 1e-12 * greatest(abs(r.min), abs(r.max), 1) ^ 2
   OR abs(r.ks - m.ks) > 1e-9 * greatest(abs(r.ks), abs(m.ks)) + 1e-12 * greatest(abs(r.min), abs(r.max), 1)
   OR r.longest_ms IS DISTINCT FROM m.longest_ms
   OR CASE WHEN r.longest_ms IS NOT NULL AND m.longest_ms IS NOT NULL -- values within ±1e150: no overflow
       THEN abs(r.area_locf - m.area_locf) > 1e-9 * (abs(r.area_locf) + greatest(abs(r.min), abs(r.max), 1) * ` + widthMs(i) + `)
         OR abs(r.area_linear - m.area_linear) > 1e-9 * (abs(r.area_linear) + greatest(abs(r.min), abs(r.max), 1) * ` + widthMs(i) + `)
         OR abs(r.increase - m.increase) > 1e-9 * (abs(r.increase) + greatest(abs(r.min), abs(r.max), 1) * r.n) END)
ORDER BY 1 LIMIT 1000`
}

// widthMs is tier i's width in ms as SQL text.
func widthMs(i int) string { return strconv.FormatInt(tiers.All[i].WidthMs(), 10) }

// checkedTiles is the condition on the tiles checkTilesSQL compares: those that end by
// the variable's mark, which are complete (rollupmark.go).
func checkedTiles(i int) string {
	return `coalesce(r.tile, m.tile) + INTERVAL '` + interval(tiers.All[i]) + `' <= (SELECT rollups_until FROM variables WHERE id = $1) AND `
}

// CheckTiers compares every variable's tiles from since on with its values and returns
// the tiles that differ, up to 1000 per variable and tier. progress, when not nil, is
// called after each variable.
func (s *Store) CheckTiers(ctx context.Context, since time.Time, progress func(done, total int)) ([]Mismatch, error) {
	ids, err := s.variableKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("check rollup tiers: %w", err)
	}
	var out []Mismatch
	for i, id := range ids {
		ms, err := s.CheckVariable(ctx, id, since)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return out, nil
}

// CheckVariable compares one variable's tiles of every tier, from the day holding since
// on, with its values (up to 1000 differing tiles per tier).
func (s *Store) CheckVariable(ctx context.Context, id int64, since time.Time) ([]Mismatch, error) {
	since = rebuildFrom(since)
	var out []Mismatch
	for i, t := range tiers.All {
		rows, err := s.Pool.Query(ctx, checkTilesSQL(i), id, since)
		if err != nil {
			return nil, fmt.Errorf("check %s of variable %d: %w", t.Table, id, err)
		}
		ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
			m := Mismatch{Variable: id, Table: t.Table}
			return m, r.Scan(&m.Tile, &m.N, &m.Rolled)
		})
		if err != nil {
			return nil, fmt.Errorf("check %s of variable %d: %w", t.Table, id, err)
		}
		out = append(out, ms...)
	}
	return out, nil
}

// variableKeys lists every variable's key, in order.
func (s *Store) variableKeys(ctx context.Context) ([]int64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT id FROM variables ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	return ids, nil
}
