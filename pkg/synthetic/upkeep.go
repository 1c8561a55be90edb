package synthetic

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/querybuilder"
)

// Upkeep keeps synthetic variables up to date as their inputs change (API.md §17,
// docs/synthetic.md). It follows the ingestion pipeline (ingest.Follower):
//
//   - Mark, inside each writing transaction, refuses writes and deletes of synthetic
//     variables' values, and for each written input that has dependents inserts the
//     range of the dependents' timestamps the change affects into synthetic_dirty:
//     the to-do commits with the values or not at all. Inputs without dependents cost
//     a map lookup (the graph is kept in memory, reloaded when it changes anywhere).
//   - Committed wakes the worker.
//
// The worker (Run) takes the due to-do rows of many synthetic variables at a time with
// FOR UPDATE SKIP LOCKED, locks the variables' rows, recomputes the affected timestamps
// with the backfill's statement restricted to them, and deletes the to-do in the same
// transaction, which also marks the variables' own dependents (chains): a handful of
// round trips per step whatever the number of variables (step.go). Any number of
// instances share the table: no update is lost (a to-do goes only with the commit of
// its recompute) or done twice (a to-do row is taken by one worker). A recompute that
// fails is logged, counted and retried later with backoff; ingestion never waits for it.
type Upkeep struct {
	Pool *pgxpool.Pool
	Log  *slog.Logger

	mu    sync.RWMutex
	deps  map[int64][]*Definition       // input key → the synthetic variables reading it
	synth map[int64]string              // synthetic key → label
	exprs map[string]*querybuilder.Expr // stored expression (jsonb text) → parsed, for the worker

	wake   chan struct{}
	reload chan struct{}

	recomputed *prometheus.CounterVec
	lag        prometheus.Histogram
}

// NewUpkeep makes the upkeep of an instance; reg (may be nil) gets its metrics.
func NewUpkeep(pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) *Upkeep {
	u := &Upkeep{Pool: pool, Log: log, deps: map[int64][]*Definition{}, synth: map[int64]string{},
		wake: make(chan struct{}, 1), reload: make(chan struct{}, 1),
		recomputed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_synthetic_recomputes_total",
			Help: "Recomputes of synthetic variables after their inputs changed, by outcome (ok, failed).",
		}, []string{"outcome"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sensorapi_synthetic_lag_seconds",
			Help:    "Time from an input's commit to the synthetic values' commit (oldest to-do of a recompute).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
	}
	if reg != nil {
		reg.MustRegister(u.recomputed, u.lag)
	}
	return u
}

// Invalidated asks for the graph to be read again (the cache router's "synthetic"
// messages; a reset of the listener).
func (u *Upkeep) Invalidated() {
	select {
	case u.reload <- struct{}{}:
	default:
	}
}

// Load reads the graph of every account (Mark needs it: call it before the first
// write).
func (u *Upkeep) Load(ctx context.Context) error {
	rows, err := u.Pool.Query(ctx, `SELECT s.variable_id, s.account_id, v.label, s.expression, s.inputs, s.positional
		FROM synthetic_variables s JOIN variables v ON v.id = s.variable_id`)
	if err != nil {
		return fmt.Errorf("synthetic: load the graph: %w", err)
	}
	deps, synth, exprs := map[int64][]*Definition{}, map[int64]string{}, map[string]*querybuilder.Expr{}
	for rows.Next() {
		d := &Definition{Expr: new(querybuilder.Expr)}
		var raw []byte
		if err := rows.Scan(&d.Key, &d.Account, &d.Label, &raw, &d.Inputs, &d.Positional); err != nil {
			rows.Close()
			return fmt.Errorf("synthetic: load the graph: %w", err)
		}
		if err := json.Unmarshal(raw, d.Expr); err != nil {
			rows.Close()
			return fmt.Errorf("synthetic: load the graph: variable %d: %w", d.Key, err)
		}
		synth[d.Key] = d.Label
		exprs[string(raw)] = d.Expr
		for _, in := range d.Inputs {
			deps[in] = append(deps[in], d)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("synthetic: load the graph: %w", err)
	}
	u.mu.Lock()
	u.deps, u.synth, u.exprs = deps, synth, exprs
	u.mu.Unlock()
	return nil
}

// expr is a stored expression parsed, from the cache the graph's loads fill (a
// definition newer than the last load is parsed and cached until the next).
func (u *Upkeep) expr(text string) (*querybuilder.Expr, error) {
	u.mu.RLock()
	e := u.exprs[text]
	u.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	e = new(querybuilder.Expr)
	if err := json.Unmarshal([]byte(text), e); err != nil {
		return nil, err
	}
	u.mu.Lock()
	if u.exprs == nil || len(u.exprs) > 4*len(u.synth)+1024 {
		u.exprs = map[string]*querybuilder.Expr{}
	}
	u.exprs[text] = e
	u.mu.Unlock()
	return e, nil
}

// Mark implements ingest.Follower.
func (u *Upkeep) Mark(ctx context.Context, tx pgx.Tx, changes []ingest.Change) error {
	var vars, froms, tos []int64
	u.mu.RLock()
	for _, c := range changes {
		if label, ok := u.synth[c.Variable]; ok {
			u.mu.RUnlock()
			if c.Deleted {
				return fault.Invalid(label, "The values of a synthetic variable are computed from its expression: they cannot be deleted (change the expression to recompute them).")
			}
			return fault.Invalid(label, "The values of a synthetic variable are computed from its expression: they cannot be written.")
		}
		for _, d := range u.deps[c.Variable] {
			lo, hi := d.Expr.Affected(c.From, c.To)
			vars, froms, tos = append(vars, d.Key), append(froms, max(lo, 0)), append(tos, min(hi, MaxTimestamp))
		}
	}
	u.mu.RUnlock()
	if len(vars) == 0 {
		return nil
	}
	return addDirty(ctx, PgxTx(tx), vars, froms, tos, 0)
}

// Committed implements ingest.Follower: it wakes the worker when an input changed.
func (u *Upkeep) Committed(changes []ingest.Change) {
	u.mu.RLock()
	hit := false
	for _, c := range changes {
		if len(u.deps[c.Variable]) > 0 {
			hit = true
			break
		}
	}
	u.mu.RUnlock()
	if hit {
		u.Wake()
	}
}

// Wake makes the worker look for to-do rows now.
func (u *Upkeep) Wake() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// Poll is how often the worker looks for to-do rows without being woken (rows of
// other instances' writes, retries, the settling recompute after a definition).
const Poll = 500 * time.Millisecond

// reloadEvery rereads the graph even without a notification.
const reloadEvery = 30 * time.Second

// Run works until ctx ends: it recomputes the due to-do when woken and every Poll.
// Load the graph first; Reread keeps it current beside the worker, never behind a
// long run of recomputes: Mark must see a new definition's inputs well within the
// settling recompute's delay.
func (u *Upkeep) Run(ctx context.Context) {
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.wake:
		case <-tick.C:
		}
		for ctx.Err() == nil {
			did, err := u.Step(ctx)
			if err != nil && ctx.Err() == nil {
				u.Log.Warn("synthetic variables: recompute failed", "error", err.Error())
			}
			if !did {
				break
			}
		}
	}
}

// Drain recomputes the due to-do until none is left but what another instance is
// recomputing and what failed (logged, postponed with backoff): for a process that
// exits once its writes are done (`sensorapi load`), after Run has returned. An error
// is one that kept it from taking to-do rows at all.
func (u *Upkeep) Drain(ctx context.Context) error {
	for {
		did, err := u.Step(ctx)
		if !did {
			return err
		}
		if err != nil {
			u.Log.Warn("synthetic variables: recompute failed; retried later", "error", err.Error())
		}
	}
}

// Reread rereads the graph when told to (Invalidated) and every reloadEvery, until
// ctx ends.
func (u *Upkeep) Reread(ctx context.Context) {
	reread := time.NewTicker(reloadEvery)
	defer reread.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.reload:
		case <-reread.C:
		}
		if err := u.Load(ctx); err != nil && ctx.Err() == nil {
			u.Log.Warn("synthetic variables: graph not reloaded", "error", err.Error())
		}
	}
}

// postpone pushes failed to-do rows back: 1 s, 2 s, 4 s ... at most 5 minutes.
func (u *Upkeep) postpone(ctx context.Context, ids []int64) {
	_, err := u.Pool.Exec(ctx, `UPDATE synthetic_dirty SET attempts = attempts + 1,
		not_before = now() + least(interval '5 minutes', interval '1 second' * power(2, least(attempts, 20)))
		WHERE id = ANY($1)`, ids)
	if err != nil && ctx.Err() == nil {
		u.Log.Warn("synthetic variables: failed to-do not postponed", "error", err.Error())
	}
}

// Pending is how many to-do rows wait (tests, metrics).
func Pending(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM synthetic_dirty WHERE not_before <= now()`).Scan(&n)
	return n, err
}
