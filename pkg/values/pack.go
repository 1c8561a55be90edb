package values

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// PackEvery is how often `serve` runs the packer.
const PackEvery = time.Hour

// PackLockKey is the advisory lock the packer holds while it runs: one instance packs
// at a time (two would only wait on each other's variable locks).
const PackLockKey = 7_320_032

// Packer moves the raw values of each (variable, UTC day) that ends more than After ago
// into the packed layout (values.Store.PackDay: one transaction per day, so a kill
// mid-run loses and doubles nothing and the next run goes on), then drops the chunks
// of "values" and value_minutes it emptied, giving their space back to the system.
type Packer struct {
	Store *Store
	After time.Duration
	Log   *slog.Logger
	// Workers is how many days are packed at once (at least 1): the database's cores
	// are the limit (docs/storage.md).
	Workers int
}

// DefaultWorkers is how many days `sensorapi storage pack` packs at once; serve's
// hourly job packs one at a time, beside the writers.
const DefaultWorkers = 2

// PackResult is what one run did.
type PackResult struct {
	Days, Skipped int      // (variable, day) units packed, and left as rows (sub-ms timestamps)
	Points        int64    // values packed
	Chunks        []string // emptied chunks dropped
}

// Run packs every day past the window once. It refuses a window shorter than
// PackedAge: writers look for packed days only that far back.
func (p *Packer) Run(ctx context.Context) (PackResult, error) {
	var res PackResult
	if p.After < PackedAge {
		return res, fmt.Errorf("pack: a late-data window of %s is shorter than %s", p.After, PackedAge)
	}
	conn, err := p.Store.Pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("pack: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, PackLockKey).Scan(&locked); err != nil {
		return res, fmt.Errorf("pack: %w", err)
	}
	if !locked {
		return res, ErrPackerBusy
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, PackLockKey) }()

	var cutoff time.Time
	if err := conn.QueryRow(ctx, `SELECT time_bucket(INTERVAL '1 day', now() - $1::interval)`, p.After).Scan(&cutoff); err != nil {
		return res, fmt.Errorf("pack: %w", err)
	}
	units, err := unpackedDays(ctx, p.Store.Pool, cutoff)
	if err != nil {
		return res, err
	}
	if err := p.packAll(ctx, units, &res); err != nil {
		return res, err
	}
	for _, table := range []string{`"values"`, tiers.All[0].Table} {
		dropped, err := dropEmptyChunks(ctx, p.Store.Pool, table, cutoff)
		if err != nil {
			return res, err
		}
		res.Chunks = append(res.Chunks, dropped...)
	}
	return res, nil
}

// packAll packs the units, Workers at a time (the database does the work: one
// backend per worker).
func (p *Packer) packAll(ctx context.Context, units []unit, res *PackResult) error {
	var packed, skipped, points atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(p.Workers, 1))
	for _, u := range units {
		g.Go(func() error {
			n, err := p.Store.PackDay(gctx, u.variable, u.day)
			switch {
			case err != nil:
				return err
			case n > 0:
				packed.Add(1)
				points.Add(int64(n))
			default:
				skipped.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	res.Days, res.Skipped, res.Points = int(packed.Load()), int(skipped.Load()), points.Load()
	return err
}

// ErrPackerBusy: another instance is packing now.
var ErrPackerBusy = errors.New("pack: another instance is packing (advisory lock held)")

type unit struct {
	variable int64
	day      time.Time
}

// unpackedDays lists the (variable, day) holding rows before cutoff, oldest first.
func unpackedDays(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time) ([]unit, error) {
	rows, err := pool.Query(ctx, unpackedDaysSQL, cutoff)
	if err != nil {
		return nil, fmt.Errorf("pack: list days: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (unit, error) {
		var u unit
		return u, r.Scan(&u.day, &u.variable)
	})
}

// unpackedDaysSQL walks each variable's days that hold rows before $1 down the
// (variable_id, ts) index, one probe per day: a DISTINCT over the rows read every row
// before the cutoff (all of a day's fleet at each hourly run; 1.2 s of the benchmark's
// 4 M points), where this reads one per (variable, day).
const unpackedDaysSQL = `WITH RECURSIVE d AS (
    SELECT v.id AS variable_id,
           (SELECT time_bucket(INTERVAL '1 day', x.ts) FROM "values" x
            WHERE x.variable_id = v.id AND x.ts < $1 ORDER BY x.ts DESC LIMIT 1) AS day
    FROM variables v
    UNION ALL
    SELECT d.variable_id,
           (SELECT time_bucket(INTERVAL '1 day', x.ts) FROM "values" x
            WHERE x.variable_id = d.variable_id AND x.ts < d.day ORDER BY x.ts DESC LIMIT 1)
    FROM d WHERE d.day IS NOT NULL
)
SELECT day, variable_id FROM d WHERE day IS NOT NULL ORDER BY 1, 2`

// dropEmptyChunks drops the chunks of table that end by cutoff and hold no row, each
// under an exclusive lock taken before it is found empty: a writer that unpacked a day
// into it meanwhile either committed first (then it is not empty) or waits for the
// drop and writes into a new chunk.
func dropEmptyChunks(ctx context.Context, pool *pgxpool.Pool, table string, cutoff time.Time) ([]string, error) {
	rows, err := pool.Query(ctx, chunksSQL, table, cutoff)
	if err != nil {
		return nil, fmt.Errorf("pack: list chunks of %s: %w", table, err)
	}
	type chunk struct {
		name       string
		start, end time.Time
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chunk, error) {
		var c chunk
		return c, r.Scan(&c.name, &c.start, &c.end)
	})
	if err != nil {
		return nil, fmt.Errorf("pack: list chunks of %s: %w", table, err)
	}
	var dropped []string
	for _, c := range chunks {
		gone := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// writers queue behind a waiting ACCESS EXCLUSIVE lock: give up soon
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `LOCK TABLE `+c.name+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				return err
			}
			var empty bool
			if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM `+c.name+`)`).Scan(&empty); err != nil || !empty {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT drop_chunks($1::regclass, older_than => $2::timestamptz, newer_than => $3::timestamptz)`,
				table, c.end, c.start)
			gone = err == nil
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("pack: drop emptied chunk %s: %w", c.name, err)
		}
		if gone {
			dropped = append(dropped, c.name)
		}
	}
	return dropped, nil
}

// chunksSQL lists a hypertable's chunks that end by a time, oldest first.
const chunksSQL = `SELECT format('%I.%I', c.chunk_schema, c.chunk_name), c.range_start, c.range_end
FROM timescaledb_information.chunks c
WHERE format('%I.%I', c.hypertable_schema, c.hypertable_name)::regclass = $1::regclass AND c.range_end <= $2
ORDER BY c.range_end`

// Loop runs the packer now and then every interval until ctx ends; a failed run is
// logged and retried at the next tick.
func (p *Packer) Loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		res, err := p.Run(ctx)
		switch {
		case err != nil && !errors.Is(err, ErrPackerBusy) && ctx.Err() == nil:
			p.Log.Warn("packing failed; retried at the next run", "error", err.Error())
		case res.Days > 0 || len(res.Chunks) > 0:
			p.Log.Info("packed", "days", res.Days, "skipped", res.Skipped, "chunks_dropped", len(res.Chunks))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
