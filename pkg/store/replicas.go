package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// Replicas routes the read-only routes that scan values (API.md §15) to streaming
// replicas of the primary, keeping reads consistent with acknowledged writes: a read
// notes the primary's WAL position when it starts and runs on a replica only once that
// replica has replayed up to it, waiting at most maxLag; otherwise, or when a replica
// fails, it runs on the primary. A replica never causes an error.
type Replicas struct {
	primary   *DB
	replicas  []*replica
	maxLag    time.Duration
	positions *walPositions
	next      atomic.Uint64 // round robin
	reads     *prometheus.CounterVec
	log       *slog.Logger
}

// replica is one streaming replica and what its poller last saw of it.
type replica struct {
	name     string
	db       *DB
	replayed atomic.Uint64 // pg_last_wal_replay_lsn()
	lag      atomic.Int64  // ms behind the primary's last replayed commit
	up       atomic.Bool

	mu      sync.Mutex
	changed chan struct{} // closed at each poll, then replaced
}

// pollEvery is how often each replica's replay position is read.
const pollEvery = 5 * time.Millisecond

// NewReplicas opens the replicas (lazily, like Open) and registers their metrics.
func NewReplicas(primary *DB, urls []string, maxLag, queryTimeout time.Duration, reg prometheus.Registerer,
	log *slog.Logger) (*Replicas, error) {
	r := &Replicas{primary: primary, maxLag: maxLag, positions: &walPositions{pool: primary.Pool}, log: log,
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_db_reads_total", Help: "Value-scanning reads by the pool that served them (primary, replica-N).",
		}, []string{"pool"})}
	for i, u := range urls {
		db, err := open(context.Background(), u, queryTimeout, "DATABASE_REPLICA_URL", pgconn.ValidateConnectTargetSessionAttrsStandby)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		r.replicas = append(r.replicas, &replica{name: "replica-" + strconv.Itoa(i), db: db, changed: make(chan struct{})})
	}
	reg.MustRegister(r.reads, r.collector())
	return r, nil
}

// Run polls the replicas until ctx ends, then closes their pools once no poll runs.
func (r *Replicas) Run(ctx context.Context) {
	var polls sync.WaitGroup
	for _, rep := range r.replicas {
		polls.Go(func() { rep.poll(ctx, r.log) })
	}
	polls.Wait()
	r.Close()
}

// Close closes the replicas' pools.
func (r *Replicas) Close() {
	for _, rep := range r.replicas {
		_ = rep.db.Close()
	}
}

// Read runs f on a replica that has seen every write acknowledged before it was
// called, or on the primary; a failure on a replica is retried on the primary.
func (r *Replicas) Read(ctx context.Context, f func(*DB) error) error {
	rep := r.choose(ctx)
	if rep == nil {
		r.reads.WithLabelValues("primary").Inc()
		return f(r.primary)
	}
	err := f(rep.db)
	var answer *fault.Error
	if err == nil || ctx.Err() != nil || errors.As(err, &answer) { // served: an answer, even a 404
		r.reads.WithLabelValues(rep.name).Inc()
		return err
	}
	// down, lagging past a conflict with recovery, restarting: the primary answers
	r.log.Warn("read on a replica failed; reading the primary", "replica", rep.name, "error", err.Error())
	rep.up.Store(false)
	r.reads.WithLabelValues("primary").Inc()
	return f(r.primary)
}

// choose returns a replica that has replayed the primary's current WAL position, or
// nil for the primary.
func (r *Replicas) choose(ctx context.Context) *replica {
	if len(r.replicas) == 0 {
		return nil
	}
	target, err := r.positions.current(ctx)
	if err != nil {
		return nil // the primary will say what is wrong
	}
	deadline := time.NewTimer(r.maxLag)
	defer deadline.Stop()
	for {
		start := int(r.next.Add(1))
		var changed []chan struct{}
		for i := range r.replicas {
			rep := r.replicas[(start+i)%len(r.replicas)]
			if !rep.up.Load() {
				continue
			}
			if rep.replayed.Load() >= target {
				return rep
			}
			changed = append(changed, rep.next())
		}
		if len(changed) == 0 {
			return nil
		}
		select {
		case <-changed[0]: // every healthy replica is polled as often: one wakes us
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// next is a channel closed at the replica's next poll.
func (rep *replica) next() chan struct{} {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.changed
}

// poll reads the replay position every pollEvery, and every second while the replica
// is down.
func (rep *replica) poll(ctx context.Context, log *slog.Logger) {
	for ctx.Err() == nil {
		err := rep.read(ctx)
		if errors.Is(err, errNotStandby) {
			// promoted (a failover): its pool's connections stay on this primary unless
			// dropped, and a DSN naming several nodes finds the standby that is one now
			rep.db.Pool.Reset()
		}
		if was := rep.up.Swap(err == nil); was != (err == nil) {
			log.Info("replica state", "replica", rep.name, "up", err == nil, "error", fmt.Sprint(err))
		}
		rep.mu.Lock()
		close(rep.changed)
		rep.changed = make(chan struct{})
		rep.mu.Unlock()
		wait := pollEvery
		if err != nil {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

var errNotStandby = errors.New("not a standby: not in recovery")

func (rep *replica) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var standby bool
	var lsn *string
	var lagMs int64
	err := rep.db.Pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,
		coalesce((extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::bigint, 0)`).Scan(&standby, &lsn, &lagMs)
	if err != nil {
		return fmt.Errorf("replay position: %w", err)
	}
	// a promoted standby still answers the position it last replayed
	if !standby || lsn == nil {
		return errNotStandby
	}
	pos, err := parseLSN(*lsn)
	if err != nil {
		return err
	}
	rep.replayed.Store(pos)
	rep.lag.Store(lagMs)
	return nil
}

// Reads counts the reads by the pool that served them.
func (r *Replicas) Reads() *prometheus.CounterVec { return r.reads }

// Status describes each replica for /readyz.
func (r *Replicas) Status() []map[string]any {
	out := make([]map[string]any, 0, len(r.replicas))
	for _, rep := range r.replicas {
		out = append(out, map[string]any{"name": rep.name, "up": rep.up.Load(),
			"replay_lag_ms": rep.lag.Load(), "replayed_lsn": formatLSN(rep.replayed.Load())})
	}
	return out
}

// collector exports each replica's state.
func (r *Replicas) collector() prometheus.Collector {
	up := prometheus.NewDesc("sensorapi_db_replica_up", "1 while the replica answers its replay position.", []string{"replica"}, nil)
	lag := prometheus.NewDesc("sensorapi_db_replica_lag_seconds",
		"Time since the last transaction the replica replayed was committed (grows on an idle primary too).", []string{"replica"}, nil)
	return collectorFunc{descs: []*prometheus.Desc{up, lag}, collect: func(ch chan<- prometheus.Metric) {
		for _, rep := range r.replicas {
			u := 0.0
			if rep.up.Load() {
				u = 1
			}
			ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, u, rep.name)
			ch <- prometheus.MustNewConstMetric(lag, prometheus.GaugeValue, float64(rep.lag.Load())/1000, rep.name)
		}
	}}
}

type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// walPositions reads pg_current_wal_lsn() on the primary for reads that start. A read
// may only use a position read after it started (an older one could miss a write
// acknowledged in between), so instead of a time-based cache, the reads that start
// while one query is running share the next one: a burst costs one query per round
// trip, never a stale position.
type walPositions struct {
	pool    *pgxpool.Pool
	mu      sync.Mutex
	waiting []chan position
	running bool
}

type position struct {
	lsn uint64
	err error
}

func (w *walPositions) current(ctx context.Context) (uint64, error) {
	ch := make(chan position, 1)
	w.mu.Lock()
	w.waiting = append(w.waiting, ch)
	if !w.running {
		w.running = true
		go w.serve()
	}
	w.mu.Unlock()
	select {
	case p := <-ch:
		return p.lsn, p.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// serve answers the waiting reads with one query each round, until none wait.
func (w *walPositions) serve() {
	for {
		w.mu.Lock()
		batch := w.waiting
		w.waiting = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		p := w.read()
		for _, ch := range batch {
			ch <- p
		}
	}
}

func (w *walPositions) read() position {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var s string
	if err := w.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		return position{err: fmt.Errorf("primary WAL position: %w", err)}
	}
	lsn, err := parseLSN(s)
	return position{lsn: lsn, err: err}
}

// parseLSN reads PostgreSQL's X/Y notation.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("WAL position %q: not X/Y", s)
	}
	return h<<32 | l, nil
}

func formatLSN(p uint64) string { return fmt.Sprintf("%X/%X", p>>32, p&0xFFFFFFFF) }
