// Package budget holds the database to a size budget (API.md §16, issue 33), as
// Prometheus' --storage.tsdb.retention.size and VictoriaMetrics' read-only mode do: a
// poller measures what the database's disk holds; past SENSORAPI_RETENTION_SIZE the
// oldest chunks of raw values are dropped (the rollup tiers kept, as time-based
// retention does), and past SENSORAPI_WRITE_STOP_SIZE writes are refused with 507
// (MQTT 5: 0x97) while reads, deletes and retention go on, so that PostgreSQL itself
// never meets a full disk (which it answers with SQLSTATE 53100 and, when its WAL
// cannot grow, a PANIC).
package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/retention"
)

// Every is how often the size is measured: a write may pass the budget by what the
// service writes in this long (keep that much room between the budget and the disk).
const Every = 5 * time.Second

// sizeSQL is what the database's disk holds: every database's files (tables, indexes,
// TOAST) plus the WAL, which alone reached 256 MB when a disk filled under load.
// pg_ls_waldir needs superuser or pg_monitor; without it the WAL is not counted
// (sizeNoWALSQL) and the log says so once.
const (
	sizeSQL      = `SELECT (SELECT sum(pg_database_size(oid)) FROM pg_database)::bigint + (SELECT coalesce(sum(size), 0) FROM pg_ls_waldir())::bigint`
	sizeNoWALSQL = `SELECT (SELECT sum(pg_database_size(oid)) FROM pg_database)::bigint`
)

// Budget measures the database's size and admits writes while it is under the budget.
type Budget struct {
	pool *pgxpool.Pool
	stop int64 // bytes; writes are refused at or past it
	// Retention, when set, drops the oldest raw chunks while the size is past its Size.
	Retention *SizeRetention
	log       *slog.Logger
	size      atomic.Int64 // bytes, as last measured (0: not yet)
	refused   atomic.Int64
	noWAL     atomic.Bool // pg_ls_waldir is not allowed: the WAL is not counted

	sizeGauge    prometheus.Gauge
	refusedCount prometheus.Counter
}

// New is a budget of stop bytes (0: measure only) whose metrics are registered on reg.
func New(pool *pgxpool.Pool, stop int64, reg prometheus.Registerer, log *slog.Logger) *Budget {
	b := &Budget{pool: pool, stop: stop, log: log,
		sizeGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sensorapi_storage_bytes", Help: "What the database's disk holds (every database and the WAL), as last measured.",
		}),
		refusedCount: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sensorapi_storage_writes_refused_total", Help: "Writes refused with 507: the database was past SENSORAPI_WRITE_STOP_SIZE.",
		}),
	}
	budget := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sensorapi_storage_write_stop_bytes", Help: "SENSORAPI_WRITE_STOP_SIZE in bytes; 0: none.",
	})
	budget.Set(float64(stop))
	reg.MustRegister(b.sizeGauge, b.refusedCount, budget)
	return b
}

// Run measures the size now and every Every until ctx ends.
func (b *Budget) Run(ctx context.Context) {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		if err := b.measure(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("storage size not measured; the last measurement stands", "error", err.Error())
		} else if err == nil && b.Retention != nil {
			b.trim(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// measure reads the size once.
func (b *Budget) measure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, Every)
	defer cancel()
	q := sizeSQL
	if b.noWAL.Load() {
		q = sizeNoWALSQL
	}
	var n int64
	err := b.pool.QueryRow(ctx, q).Scan(&n)
	if err != nil && !b.noWAL.Load() && isPermissionDenied(err) {
		b.noWAL.Store(true)
		b.log.Warn("the WAL is not counted in the storage size: grant pg_monitor to the service's role", "error", err.Error())
		err = b.pool.QueryRow(ctx, sizeNoWALSQL).Scan(&n)
	}
	if err != nil {
		return fmt.Errorf("measure storage size: %w", err)
	}
	b.size.Store(n)
	b.sizeGauge.Set(float64(n))
	return nil
}

// SizeRetention drops raw chunks, oldest first, while the database is past Size
// (SENSORAPI_RETENTION_SIZE), through the retention job, so that the raw horizon, the
// tiers' answers before it, the metrics and the log follow as for a time-based run.
type SizeRetention struct {
	Size int64 // bytes
	Job  retention.Job
}

// maxDropsPerCheck bounds one check's work; the next check goes on.
const maxDropsPerCheck = 16

// trim drops the oldest raw chunk and measures again while the size is past the
// retention size. The chunk being written is never dropped: past the size with that
// one only, the log says so and the write stop (if any) takes over.
func (b *Budget) trim(ctx context.Context) {
	r := b.Retention
	for i := 0; i < maxDropsPerCheck && b.size.Load() > r.Size && ctx.Err() == nil; i++ {
		now := time.Now()
		end, ok, err := retention.OldestRawChunkEnd(ctx, b.pool, now)
		if err != nil || !ok {
			b.log.Warn("past SENSORAPI_RETENTION_SIZE with no finished raw chunk left to drop",
				"bytes", b.size.Load(), "retention_size", r.Size, "error", errString(err))
			return
		}
		job := r.Job
		job.Options = retention.Options{Raw: now.Sub(end), Now: func() time.Time { return now }}
		if res, err := job.Run(ctx); err != nil || res.Skipped {
			return // logged by the job; another instance may be dropping it
		}
		if err := b.measure(ctx); err != nil {
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Admit is nil while writes may go on, fault.StorageBudget once the database is past
// the budget.
func (b *Budget) Admit() error {
	if b.stop == 0 || b.size.Load() < b.stop {
		return nil
	}
	b.refused.Add(1)
	b.refusedCount.Inc()
	return fault.StorageBudget
}

// Status is the budget's state for /healthz.
type Status struct {
	Bytes         int64 `json:"bytes"`
	WriteStop     int64 `json:"writeStopBytes"`
	WritesRefused int64 `json:"writesRefused"`
	WALCounted    bool  `json:"walCounted"`
}

// Status reports the last measurement.
func (b *Budget) Status() Status {
	return Status{Bytes: b.size.Load(), WriteStop: b.stop, WritesRefused: b.refused.Load(), WALCounted: !b.noWAL.Load()}
}

// isPermissionDenied: SQLSTATE 42501, insufficient privilege.
func isPermissionDenied(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}
