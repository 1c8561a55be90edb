package values

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// Each variable's rollup tiles are complete for every tile that ends by its mark,
// rollups_until (sql/20261128000001_rollups_until.up.sql). A write reads the marks of
// its variables under the row locks it takes anyway (lastValueSQL) and sends rollups only
// for the tiles that end by them: a fleet's fresh values cost their rows in "values" and
// nothing in the tiers. CatchUp builds the tiles behind the values and moves the marks;
// readers use tiles only before the smallest mark of all variables (RollupsUntil), raw
// values after it. A reader may know that mark late: marks only move forward, so an old
// one is merely smaller.

// minuteSQL is the minute holding the database's now(): where CatchUpNow moves the marks.
const minuteSQL = `date_trunc('minute', now())`

// rollupsUntilSQL is the smallest mark; with no variable, the current minute (a variable
// created later starts at its own creation's minute, not before it).
const rollupsUntilSQL = `SELECT coalesce(min(rollups_until), ` + minuteSQL + `) FROM variables`

// RollupsUntil is the time before which every variable's tiles are complete: a read may
// take the tiles that end by it (querybuilder.TierBounds).
func RollupsUntil(ctx context.Context, pool *pgxpool.Pool) (time.Time, error) {
	var t time.Time
	if err := pool.QueryRow(ctx, rollupsUntilSQL).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the rollup tiles' mark: %w", err)
	}
	return t.UTC(), nil
}

// catchUpBatch is how many variables one transaction of CatchUp moves: their rows stay
// locked while their tiles are built (a few ms for 50 variables with a minute of values
// each, more the further behind), so a writer of them waits that long at most.
const catchUpBatch = 50

// lockBehindSQL locks the next variables whose mark is behind $1, in key order, skipping
// those a writer holds: CatchUp never waits for a writer (so never deadlocks with one)
// and takes the skipped ones at its next run.
const lockBehindSQL = `SELECT id, rollups_until FROM variables
WHERE rollups_until < $1 AND id > $2 AND ($4::bigint IS NULL OR id = $4)
ORDER BY id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED`

// catchUpDeleteSQL and catchUpInsertSQL rebuild tier i's tiles in [lo, $3) of each
// variable ($1, $2: keys and their lo) from the tier below (the minutes: from "values").
func catchUpDeleteSQL(i int) string {
	return `DELETE FROM ` + tiers.All[i].Table + ` m USING unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, lo)
WHERE m.variable_id = w.variable_id AND m.tile >= w.lo AND m.tile < $3`
}

func catchUpInsertSQL(i int) string {
	cond := `src.variable_id = w.variable_id AND ` + sourceTime(i) + ` >= w.lo AND ` + sourceTime(i) + ` < $3`
	return `INSERT INTO ` + tiers.All[i].Table + ` (` + tileColumns + `)
SELECT f.* FROM unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, lo)
CROSS JOIN LATERAL (` + tileSource(i, cond) + `) f`
}

const moveMarkSQL = `UPDATE variables SET rollups_until = $2 WHERE id = ANY($1)`

// CatchUp moves every variable's mark that is behind until to it, in transactions of
// catchUpBatch variables, and returns how many it moved. For each tier, finest first,
// it rebuilds from the tier below the tiles that start in [the mark's tile, until's
// tile): those that end in (mark, until]; a tile holding until is left for a later run.
// Packed days are never among them (the packer packs only days before the mark).
// Variables a writer holds at that moment are skipped until the next run. A batch that
// fails is done again one variable at a time, so that one variable whose tiles cannot be
// built keeps only its own mark behind (and the readers' smallest mark: slower reads,
// never wrong ones); the first such error is returned after the others moved.
func (s *Store) CatchUp(ctx context.Context, until time.Time) (int, error) {
	until = until.UTC()
	moved := 0
	var failed error
	for after := int64(0); ; {
		ids, err := s.catchUpNext(ctx, until, after, nil)
		switch {
		case err == nil:
			moved += len(ids)
		case ctx.Err() != nil || len(ids) == 0:
			return moved, err
		default: // one variable may be at fault: the others go on alone
			for _, id := range ids {
				if _, err := s.catchUpNext(ctx, until, id-1, &id); err != nil {
					failed = cmp.Or(failed, err)
					continue
				}
				moved++
			}
		}
		if len(ids) == 0 {
			return moved, failed
		}
		after = ids[len(ids)-1]
	}
}

// catchUpNext moves the marks of the next batch of variables after key after (of the
// variable only, when not nil), in one transaction, and returns the variables it took:
// moved unless it failed; none when no variable was behind.
func (s *Store) catchUpNext(ctx context.Context, until time.Time, after int64, only *int64) ([]int64, error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var marks []time.Time
		ids = ids[:0]
		rows, err := tx.Query(ctx, lockBehindSQL, until, after, catchUpBatch, only)
		if err != nil {
			return err
		}
		var id int64
		var mark time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &mark}, func() error {
			ids, marks = append(ids, id), append(marks, mark)
			return nil
		}); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		for i, t := range tiers.All {
			los := make([]time.Time, len(marks))
			for j, m := range marks {
				los[j] = time.UnixMilli(t.Floor(m.UnixMilli())).UTC()
			}
			hi := time.UnixMilli(t.Floor(until.UnixMilli())).UTC()
			b.Queue(catchUpDeleteSQL(i), ids, los, hi)
			b.Queue(catchUpInsertSQL(i), ids, los, hi)
		}
		b.Queue(moveMarkSQL, ids, until)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return ids, fmt.Errorf("build rollup tiles of variables %v up to %s: %w", ids, until.Format(time.RFC3339), err)
	}
	return ids, nil
}

// CatchUpNow is CatchUp up to the database's current minute.
func (s *Store) CatchUpNow(ctx context.Context) (int, error) {
	var until time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT `+minuteSQL).Scan(&until); err != nil {
		return 0, fmt.Errorf("build rollup tiles: %w", err)
	}
	return s.CatchUp(ctx, until)
}

// CatchUpEvery is how often each instance runs CatchUpNow: the marks trail the clock by
// at most a minute and this much, and so do the raw values a read of recent data scans.
const CatchUpEvery = time.Minute

// CatchUpLoop runs CatchUpNow every CatchUpEvery until ctx ends; a failed run is logged
// and retried at the next tick. Instances may run it side by side: each skips the
// variables another has locked.
func (s *Store) CatchUpLoop(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(CatchUpEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		n, err := s.CatchUpNow(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("building rollup tiles behind the values failed; retried at the next run", "error", err.Error())
		case n > 0:
			log.Debug("rollup tiles built", "variables", n, "seconds", time.Since(start).Seconds())
		}
	}
}
