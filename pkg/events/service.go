package events

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/config"
)

// Deps are what the service uses of its instance.
type Deps struct {
	Pool          *pgxpool.Pool
	Writer        Writer // the ingestion pipeline
	Invalidations *cache.Router
	Registry      *prometheus.Registry
	Log           *slog.Logger
	Config        config.Events
	QueryTimeout  time.Duration
	// Deliver runs the deliveries beside the evaluations; without it they wait in the
	// queue for an instance that does (a process that exits once it wrote).
	Deliver bool
}

// settings are the service's configuration with defaults applied.
type settings struct {
	config.Events
	QueryTimeout time.Duration
}

// Service evaluates one instance's share of event conditions and runs deliveries.
// It follows the ingestion pipeline (ingest.Follower: Mark, Committed).
type Service struct {
	pool    *pgxpool.Pool
	writer  Writer
	log     *slog.Logger
	cfg     settings
	deliver bool
	river   *river.Client[pgx.Tx]
	http    *http.Client
	metrics *metrics

	watched atomic.Pointer[map[int64][]int64] // variable key → its active events' keys
	reload  chan struct{}
	shards  []*shard      // one per evaluator (memory.go)
	epoch   atomic.Uint64 // moved when notifications may have been missed: the shards drop every entry
}

// New builds the service: its River client (not started) and its metrics.
func New(d Deps) (*Service, error) {
	cfg := settings{Events: d.Config.WithDefaults(), QueryTimeout: d.QueryTimeout}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 30 * time.Second
	}
	s := &Service{pool: d.Pool, writer: d.Writer, log: d.Log, cfg: cfg, deliver: d.Deliver,
		http: newHTTPClient(cfg.WebhookAllowPrivate), reload: make(chan struct{}, 1)}
	for range cfg.Evaluators {
		s.shards = append(s.shards, newShard())
	}
	s.watched.Store(&map[int64][]int64{})
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{s: s}); err != nil {
		return nil, fmt.Errorf("events worker: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{
		Queues:               map[string]river.QueueConfig{queueName: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		RetryPolicy:          retryPolicy{base: cfg.RetryBase, max: cfg.RetryMax},
		MaxAttempts:          maxAttempts,
		JobTimeout:           cfg.Timeout + 5*time.Second,
		RescueStuckJobsAfter: cfg.Timeout + time.Minute,
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    cfg.Poll,
		// No LISTEN connection of River's own: PostgreSQL makes every listening backend
		// read every notification on the queue, and a fleet's last-value notifications
		// are thousands per second; besides, River's producer missed some insert
		// notifications (measured: 7 of 100 transitions waited for the 1 s poll). New
		// deliveries wait for the next poll (Config.Poll, 100 ms by default).
		PollOnly: true,
		Logger:   slog.New(warnOnly{d.Log.Handler()}).With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("events queue: %w", err)
	}
	s.river = rc
	s.metrics = newMetrics(d.Registry, s.oldestPending)
	d.Invalidations.On("event", func(i cache.Invalidation) { s.forget(i.Account); s.reloadWatched() })
	// a device or variable relabelled: the evaluators' entries hold the labels that
	// templates show; read them again
	d.Invalidations.On("device", func(i cache.Invalidation) { s.forget(i.Account) })
	d.Invalidations.On("variable", func(i cache.Invalidation) { s.forget(i.Account) })
	return s, nil
}

// Reload asks for the set of watched variables to be read again, and for the
// evaluators to read every event again: notifications may have been missed. It never
// blocks.
func (s *Service) Reload() {
	s.epoch.Add(1)
	s.reloadWatched()
}

// reloadWatched asks for the set of watched variables to be read again; it never blocks.
func (s *Service) reloadWatched() {
	select {
	case s.reload <- struct{}{}:
	default:
	}
}

// forget tells the evaluators that an account's events, devices or variables changed:
// only its entries are read again, so that one account's changes do not send every
// other account's events to the database. Account 0 (a message that names none, from
// a schema before 20261208000001) drops every entry.
func (s *Service) forget(account int64) {
	if account == 0 {
		s.epoch.Add(1)
		return
	}
	for _, sh := range s.shards {
		sh.markStale(account)
	}
}

// Refresh reads the watched variables now, after an event of the account was written
// through this instance; on failure the sweep does it later.
func (s *Service) Refresh(ctx context.Context, account int64) {
	s.forget(account)
	if err := s.load(ctx); err != nil {
		s.log.Warn("read watched variables; the sweep retries", "error", err.Error())
	}
}

// Run starts the deliveries' River client (with Deps.Deliver), the evaluators and the
// sweep, until ctx ends; then it stops them (running deliveries are cancelled and
// retried, here or on another instance) and returns. Call it once.
func (s *Service) Run(ctx context.Context) {
	if err := s.load(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("read watched variables; the sweep retries", "error", err.Error())
	}
	var wg sync.WaitGroup
	var started atomic.Bool
	if s.deliver {
		wg.Go(func() { started.Store(s.startDeliveries(ctx)) })
	}
	for _, sh := range s.shards {
		wg.Go(func() { s.shardLoop(ctx, sh) })
	}
	wg.Go(func() { s.sweepLoop(ctx) })
	<-ctx.Done()
	wg.Wait()
	if started.Load() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.river.StopAndCancel(sctx); err != nil {
			s.log.Warn("stop event deliveries", "error", err.Error())
		}
		cancel()
	}
}

// startDeliveries starts the River client, retrying every 2 s while the database
// cannot be reached (River pings it first); false when ctx ended first.
func (s *Service) startDeliveries(ctx context.Context) bool {
	for {
		err := s.river.Start(context.WithoutCancel(ctx))
		if err == nil {
			return true
		}
		s.log.Warn("start event deliveries; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Second):
		}
	}
}

// sweepLoop reloads the watched set when asked, and every Sweep queues the events
// whose variable holds values newer than their last evaluation (a wake-up lost to a
// crash, a full queue or an instance that does not watch the variable yet).
func (s *Service) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Sweep)
	defer t.Stop()
	pruned := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.reload:
			if err := s.load(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("read watched variables", "error", err.Error())
			}
		case <-t.C:
			if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("event sweep", "error", err.Error())
			}
			if time.Since(pruned) > time.Hour {
				pruned = time.Now()
				s.prune(ctx)
			}
		}
	}
}

// load reads the variables that have active events.
func (s *Service) load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT variable_id, id FROM events WHERE is_active ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	m := map[int64][]int64{}
	var v, e int64
	_, err = pgx.ForEachRow(rows, []any{&v, &e}, func() error {
		m[v] = append(m[v], e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	s.watched.Store(&m)
	s.metrics.active.Set(float64(len(m)))
	return nil
}

// sweepGrace is how long after its last value moved a variable written through the
// pipeline is left to the instance that wrote it (which evaluates it in memory and
// saves its bookkeeping every flushEvery) before the sweep of any instance looks at it.
// A synthetic variable's values do not go through the pipeline: the sweep is what
// evaluates them, at once.
func (s *Service) sweepGrace() time.Duration { return 3 * s.flushEvery() }

// sweep reloads the watched set and hands the evaluators the variables with values
// newer than their events' stored last evaluated one; each evaluator evaluates from
// the database those whose entry has not reached the variable's last value.
func (s *Service) sweep(ctx context.Context) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT e.variable_id, max((extract(epoch FROM v.last_value_ts) * 1000)::bigint)
		FROM events e JOIN event_states s ON s.event_id = e.id JOIN variables v ON v.id = e.variable_id
		WHERE e.is_active AND v.last_value_ts IS NOT NULL
		AND (extract(epoch FROM v.last_value_ts) * 1000)::bigint > coalesce(s.last_ts, -1)
		AND (v.synthetic_expression <> '' OR v.last_value_created < now() - $1::interval)
		GROUP BY e.variable_id`, s.sweepGrace())
	if err != nil {
		return fmt.Errorf("sweep events: %w", err)
	}
	var v, last int64
	_, err = pgx.ForEachRow(rows, []any{&v, &last}, func() error {
		s.send(item{variable: v, sweep: true, last: last})
		return nil
	})
	return err
}

// DeliveryRetention is how long finished deliveries (delivered or failed) stay
// listed; River keeps its finished jobs 24 h.
const DeliveryRetention = 30 * 24 * time.Hour

// prune removes finished deliveries older than DeliveryRetention.
func (s *Service) prune(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM event_deliveries WHERE created_at < now() - $1::interval
		AND status IN ('delivered', 'failed')`, DeliveryRetention)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("prune event deliveries", "error", err.Error())
	}
}

// oldestPending is the age of the oldest delivery not yet delivered nor failed.
func (s *Service) oldestPending() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var age *float64
	err := s.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - min(created_at))::float8
		FROM event_deliveries WHERE status IN ('pending', 'retrying')`).Scan(&age)
	if err != nil || age == nil {
		return 0
	}
	return *age
}

// warnOnly passes on River's warnings and errors only.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }

func (h warnOnly) WithGroup(g string) slog.Handler { return warnOnly{h.Handler.WithGroup(g)} }
