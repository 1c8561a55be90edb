package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/tiers"
)

// The coarse tiers (every tier but the minutes) are complete, for each variable, before
// its coarse_until: writers add to a coarse tile only when it ends by then (coarseOnly),
// so that a fleet's fresh values cost one tile each instead of three. Coarsen builds the
// coarse tiles past the mark from the tier below and moves it; readers use coarse tiles
// only before the smallest mark of all variables (CoarseUntil), which a reader may know
// late: the mark only moves forward, so an old one is merely smaller.

// quarterSQL is the quarter-hour holding the database's now(): where Coarsen moves the
// marks to (quarters count from the epoch; 2000-01-01 is on one).
const quarterSQL = `date_bin(INTERVAL '15 minutes', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00')`

// coarseUntilSQL is the smallest mark; with no variable, the current quarter-hour (a
// variable created later starts at its own creation's quarter-hour, not before it).
const coarseUntilSQL = `SELECT coalesce(min(coarse_until), ` + quarterSQL + `) FROM variables`

// Querier reads one row: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CoarseUntil is the time before which every variable's coarse tiles are complete: a
// read may take coarse tiles that end by it (querybuilder's CoarseUntil).
func CoarseUntil(ctx context.Context, q Querier) (time.Time, error) {
	var t time.Time
	if err := q.QueryRow(ctx, coarseUntilSQL).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read coarse tiers' mark: %w", err)
	}
	return t.UTC(), nil
}

// coarsenBatch is how many variables one transaction of Coarsen moves: their rows stay
// locked while their tiles are built (~10 ms per hundred variables with a quarter-hour
// of minutes each), so writers of them wait that long at most.
const coarsenBatch = 200

// lockBehindSQL locks the next variables whose mark is behind $1, in key order, skipping
// those a writer holds: Coarsen never waits for a writer (so never deadlocks with one)
// and takes the skipped ones at its next run.
const lockBehindSQL = `SELECT id, coarse_until FROM variables WHERE coarse_until < $1 AND id > $2
ORDER BY id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED`

// coarseDeleteSQL and coarseInsertSQL rebuild tier i's tiles in [lo, $3) of each variable
// ($1, $2: keys and their lo) from the tier below.
func coarseDeleteSQL(i int) string {
	return `DELETE FROM ` + tiers.All[i].Table + ` m USING unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, lo)
WHERE m.variable_id = w.variable_id AND m.tile >= w.lo AND m.tile < $3`
}

func coarseInsertSQL(i int) string {
	return `INSERT INTO ` + tiers.All[i].Table + ` (` + tileColumns + `)
SELECT f.* FROM unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, lo)
CROSS JOIN LATERAL (` + tileSource(i, `src.variable_id = w.variable_id AND src.tile >= w.lo AND src.tile < $3`) + `) f`
}

const moveMarkSQL = `UPDATE variables SET coarse_until = $2 WHERE id = ANY($1)`

// Coarsen moves every variable's coarse_until that is behind until (quarter-aligned) to
// it, in transactions of coarsenBatch variables, and returns how many it moved. For each
// coarse tier, finest first, it rebuilds from the tier below the tiles that start in
// [the mark's tile, until's tile): the quarters past the mark from the minutes, then the
// days that end in (mark, until] from those quarters. Tiles that start before the mark's
// tile are complete already; a day holding until is left for a later run. Variables a
// writer holds at that moment are skipped until the next run.
func (s *Store) Coarsen(ctx context.Context, until time.Time) (int, error) {
	until = until.UTC()
	moved := 0
	for after := int64(0); ; {
		n, last, err := s.coarsenNext(ctx, until, after)
		if err != nil {
			return moved, err
		}
		if n == 0 {
			return moved, nil
		}
		moved, after = moved+n, last
	}
}

// coarsenNext moves the marks of the next batch of variables after key after, in one
// transaction: how many, and the last key it looked at (0: none was behind).
func (s *Store) coarsenNext(ctx context.Context, until time.Time, after int64) (int, int64, error) {
	var ids []int64
	var marks []time.Time
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		ids, marks = ids[:0], marks[:0]
		rows, err := tx.Query(ctx, lockBehindSQL, until, after, coarsenBatch)
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
		for i := 1; i < len(tiers.All); i++ {
			t := tiers.All[i]
			los := make([]time.Time, len(marks))
			for j, m := range marks {
				los[j] = time.UnixMilli(t.Floor(m.UnixMilli())).UTC()
			}
			hi := time.UnixMilli(t.Floor(until.UnixMilli())).UTC()
			b.Queue(coarseDeleteSQL(i), ids, los, hi)
			b.Queue(coarseInsertSQL(i), ids, los, hi)
		}
		b.Queue(moveMarkSQL, ids, until)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("build coarse tiles up to %s: %w", until.Format(time.RFC3339), err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	return len(ids), ids[len(ids)-1], nil
}

// CoarsenNow is Coarsen up to the database's current quarter-hour.
func (s *Store) CoarsenNow(ctx context.Context) (int, error) {
	var until time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT `+quarterSQL).Scan(&until); err != nil {
		return 0, fmt.Errorf("build coarse tiles: %w", err)
	}
	return s.Coarsen(ctx, until)
}

// CoarsenEvery is how often each instance runs CoarsenNow: the marks trail the clock by
// up to a quarter-hour and this much (runs that find every mark current cost one index
// probe).
const CoarsenEvery = time.Minute

// CoarsenLoop runs CoarsenNow every CoarsenEvery until ctx ends; a failed run is logged
// and retried at the next tick. Instances may run it side by side: each skips the
// variables another has locked.
func (s *Store) CoarsenLoop(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(CoarsenEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		n, err := s.CoarsenNow(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("building coarse rollup tiles failed; retried at the next run", "error", err.Error())
		case n > 0:
			log.Info("coarse rollup tiles built", "variables", n, "seconds", time.Since(start).Seconds())
		}
	}
}
