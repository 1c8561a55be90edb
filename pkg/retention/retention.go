// Package retention removes old data (API.md §16, docs/operations.md "Retention"):
// whole chunks of raw values older than SENSORAPI_RETENTION_RAW, and of the rollup
// tiers older than SENSORAPI_RETENTION_ROLLUPS, with TimescaleDB's drop_chunks. The
// Apache build has no retention policies, so this is the service's own job: `serve`
// runs it at start and hourly, `sensorapi retention run` once. Instances take turns
// through an advisory lock; the one that holds it records the raw horizon in
// retention_state, where every instance reads it (Horizon, Cache).
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// LockKey is the PostgreSQL advisory lock (pg_try_advisory_lock, session level) a run
// holds on one connection from start to end. An instance that finds it taken skips
// its run: another one is doing the same work. (The migrations use 727_431_118.)
const LockKey int64 = 727_431_119

// Options say how long data is kept; zero keeps it forever.
type Options struct {
	Raw     time.Duration    // raw values ("values")
	Rollups time.Duration    // the rollup tiers (tiers.All)
	Now     func() time.Time // nil: time.Now (tests move it)
}

// Chunk is one dropped chunk of raw values.
type Chunk struct {
	Name       string // schema-qualified
	Start, End time.Time
	Rows       int64 // counted just before the drop
}

// Tier is what a run did to one tier table.
type Tier struct {
	Table  string
	Chunks int // chunks dropped
}

// Result is what one run did.
type Result struct {
	Skipped bool // another instance held the lock: nothing was done

	RawCutoff   time.Time // now − Raw; zero without a raw retention
	RawChunks   []Chunk   // chunks of "values" dropped by this run, oldest first
	RowsRemoved int64     // raw rows in them
	// Horizon is the raw horizon after the run (see Horizon); HasHorizon is false while
	// no chunk of raw values was ever dropped.
	Horizon    time.Time
	HasHorizon bool

	TierCutoff time.Time // now − Rollups; zero without a rollup retention
	Tiers      []Tier    // one per rollup tier, with a rollup retention
}

// Querier is what Horizon reads through: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// replica's pool too: retention_state is replicated like any table).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Horizon reads the raw horizon: the oldest timestamp still held raw, which is the end
// of the newest chunk of raw values dropped so far. ok is false while none was: every
// raw value ever written is still there. It is one primary-key read; Cache keeps it
// for a few seconds.
func Horizon(ctx context.Context, q Querier) (time.Time, bool, error) {
	var h *time.Time
	if err := q.QueryRow(ctx, `SELECT raw_horizon FROM retention_state`).Scan(&h); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, fmt.Errorf("read the raw horizon: %w", err)
	}
	if h == nil {
		return time.Time{}, false, nil
	}
	return h.UTC(), true, nil
}

// Run applies the retention once, now, if no other session holds LockKey (else it
// returns Result{Skipped: true}). Raw chunks are dropped and the horizon recorded in
// one transaction; each tier table is trimmed in a transaction of its own after it.
// Nothing is done for a zero duration.
func Run(ctx context.Context, pool *pgxpool.Pool, o Options) (Result, error) {
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("retention: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, LockKey).Scan(&locked); err != nil {
		return Result{}, fmt.Errorf("retention: take the advisory lock: %w", err)
	}
	if !locked {
		return Result{Skipped: true}, nil
	}
	defer unlock(conn)

	var res Result
	if o.Raw > 0 {
		res.RawCutoff = now.Add(-o.Raw).UTC()
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return dropRaw(ctx, tx, res.RawCutoff, now, &res)
		}); err != nil {
			return res, fmt.Errorf("retention of raw values: %w", err)
		}
	} else if _, err := conn.Exec(ctx, `UPDATE retention_state SET ran_at = $1`, now); err != nil {
		return res, fmt.Errorf("retention: %w", err)
	}
	if o.Rollups > 0 {
		res.TierCutoff = now.Add(-o.Rollups).UTC()
		for _, tier := range tiers.All {
			table := tier.Table
			t := Tier{Table: table}
			if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				return dropTier(ctx, tx, res.TierCutoff, &t)
			}); err != nil {
				return res, fmt.Errorf("retention of %s: %w", table, err)
			}
			res.Tiers = append(res.Tiers, t)
		}
	}
	res.Horizon, res.HasHorizon, err = Horizon(ctx, conn)
	return res, err
}

// OldestRawChunkEnd is the end of the oldest chunk of raw values (either layout) that ended by now (the
// chunk being written is never offered): what a size-based run drops first (pkg/budget).
func OldestRawChunkEnd(ctx context.Context, q Querier, now time.Time) (time.Time, bool, error) {
	var oldest *time.Time
	for _, table := range values.RawTables {
		var end *time.Time
		if err := q.QueryRow(ctx, `SELECT min(range_end) FROM (`+chunksSQL+`) c(name, range_start, range_end)`,
			table, now).Scan(&end); err != nil {
			return time.Time{}, false, fmt.Errorf("oldest raw chunk: %w", err)
		}
		if end != nil && (oldest == nil || end.Before(*oldest)) {
			oldest = end
		}
	}
	if oldest == nil {
		return time.Time{}, false, nil
	}
	return *oldest, true, nil
}

// unlock releases LockKey; a connection that cannot say so is closed, which releases
// it too, rather than returned to the pool still holding it.
func unlock(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, LockKey); err != nil {
		_ = conn.Hijack().Close(ctx)
	}
}

// runSettings bound how long a run may wait for a chunk's lock (a long read of an old
// chunk holds one; every later reader of that chunk would queue behind the drop) and
// lift the session's statement timeout for the counts. A run that gives up is retried
// at the next one.
const runSettings = `SET LOCAL lock_timeout = '10s'; SET LOCAL statement_timeout = 0`

// chunksSQL lists a hypertable's chunks that end at or before a time, oldest first:
// the ones drop_chunks(older_than => that time) drops. The table is resolved like any
// name (search_path), and a missing one has no chunks.
const chunksSQL = `SELECT format('%I.%I', c.chunk_schema, c.chunk_name), c.range_start, c.range_end
FROM timescaledb_information.chunks c
JOIN pg_class t ON t.relname = c.hypertable_name
JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = c.hypertable_schema
WHERE t.oid = to_regclass($1) AND c.range_end <= $2
ORDER BY c.range_end`

// dropRaw counts the rows of the chunks of raw values that end by the cutoff, drops
// them, and records the horizon: the end of the newest chunk dropped. The counts, the
// drop and the record commit together.
func dropRaw(ctx context.Context, tx pgx.Tx, cutoff, now time.Time, res *Result) error {
	if _, err := tx.Exec(ctx, runSettings); err != nil {
		return err
	}
	var chunks []Chunk
	for _, table := range values.RawTables {
		cs, err := rawChunks(ctx, tx, table, cutoff)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			continue
		}
		if table == values.PackedTable {
			// past the horizon the tiers answer alone: packed days get their minutes back
			if err := values.RestoreMinuteTiles(ctx, tx, cs[0].Start, cutoff); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SELECT drop_chunks($1::regclass, older_than => $2::timestamptz)`,
			table, cutoff); err != nil {
			return fmt.Errorf("drop_chunks %s: %w", table, err)
		}
		chunks = append(chunks, cs...)
	}
	var horizon *time.Time
	for _, c := range chunks {
		// what the catalog listed is what drop_chunks dropped; check rather than trust it
		var gone bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NULL`, c.Name).Scan(&gone); err != nil {
			return err
		}
		if !gone {
			continue
		}
		c.Start, c.End = c.Start.UTC(), c.End.UTC()
		res.RawChunks = append(res.RawChunks, c)
		res.RowsRemoved += c.Rows
		if horizon == nil || c.End.After(*horizon) {
			horizon = &c.End
		}
	}
	// greatest() ignores NULLs: the horizon never moves back, and stays NULL until a
	// first drop
	_, err := tx.Exec(ctx, `UPDATE retention_state
		SET raw_horizon = greatest(raw_horizon, $1), rows_removed = rows_removed + $2, ran_at = $3`,
		horizon, res.RowsRemoved, now)
	return err
}

// rawChunks lists the chunks of a table of raw values that end by the cutoff, with the
// values each holds (a packed row holds n).
func rawChunks(ctx context.Context, tx pgx.Tx, table string, cutoff time.Time) ([]Chunk, error) {
	rows, err := tx.Query(ctx, chunksSQL, table, cutoff)
	if err != nil {
		return nil, fmt.Errorf("list chunks of %s: %w", table, err)
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Chunk, error) {
		var c Chunk
		return c, r.Scan(&c.Name, &c.Start, &c.End)
	})
	if err != nil {
		return nil, fmt.Errorf("list chunks of %s: %w", table, err)
	}
	count := values.PointsSQL(table)
	for i := range chunks {
		// the name comes from the catalog, quoted by format('%I')
		if err := tx.QueryRow(ctx, `SELECT `+count+` FROM `+chunks[i].Name).Scan(&chunks[i].Rows); err != nil {
			return nil, fmt.Errorf("count %s: %w", chunks[i].Name, err)
		}
	}
	return chunks, nil
}

// dropTier drops a tier table's chunks that end by the cutoff.
func dropTier(ctx context.Context, tx pgx.Tx, cutoff time.Time, t *Tier) error {
	if _, err := tx.Exec(ctx, runSettings); err != nil {
		return err
	}
	return tx.QueryRow(ctx, `SELECT count(*) FROM drop_chunks($1::regclass, older_than => $2::timestamptz)`,
		`"`+t.Table+`"`, cutoff).Scan(&t.Chunks)
}

// Every is how often `serve` runs the job (API.md §16: at least hourly).
const Every = time.Hour

// Job runs the retention with metrics and logs: `serve` runs Loop, the CLI Run.
type Job struct {
	Pool    *pgxpool.Pool
	Options Options
	Metrics *metrics.Metrics // nil: none
	Log     *slog.Logger
	Cache   *Cache // nil: none; forgotten after each run, so this instance sees its own at once
}

// Run runs the retention once and reports it: the metrics, and one log line.
func (j *Job) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := Run(ctx, j.Pool, j.Options)
	log := j.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	result := "ran"
	switch {
	case err != nil:
		result = "failed"
		log.Error("retention failed", "error", err.Error())
	case res.Skipped:
		result = "skipped"
		log.Info("retention skipped: another instance holds the lock", "lock", LockKey)
	default:
		attrs := []any{"raw_chunks", len(res.RawChunks), "rows_removed", res.RowsRemoved,
			"seconds", time.Since(start).Seconds()}
		if res.HasHorizon {
			attrs = append(attrs, "raw_horizon", res.Horizon.Format(time.RFC3339))
		}
		for _, t := range res.Tiers {
			attrs = append(attrs, t.Table+"_chunks", t.Chunks)
		}
		log.Info("retention ran", attrs...)
	}
	if j.Cache != nil {
		j.Cache.Forget()
	}
	if m := j.Metrics; m != nil {
		m.RetentionRuns.WithLabelValues(result).Inc()
		m.RetentionRowsRemoved.Add(float64(res.RowsRemoved))
		if n := len(res.RawChunks); n > 0 {
			m.RetentionChunksDropped.WithLabelValues(values.RowsTable).Add(float64(n))
		}
		for _, t := range res.Tiers {
			if t.Chunks > 0 {
				m.RetentionChunksDropped.WithLabelValues(t.Table).Add(float64(t.Chunks))
			}
		}
		// every instance shows the horizon, whichever one moved it
		if h, ok, herr := Horizon(ctx, j.Pool); herr == nil {
			m.RetentionHorizon.Set(horizonSeconds(h, ok))
		}
	}
	return res, err
}

func horizonSeconds(h time.Time, ok bool) float64 {
	if !ok {
		return 0
	}
	return float64(h.UnixMilli()) / 1000
}

// Loop runs the job now and then every interval (an hour in `serve`) until ctx ends.
// A failed run is logged and retried at the next tick.
func (j *Job) Loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		_, _ = j.Run(rctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
