package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/semaphore"

	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/values"
)

// Pipeline is the one way values are written (HTTP routes, MQTT, `sensorapi load`):
// each message is parsed and validated alone by its caller, resolved to keys through
// the caches, queued, and committed together with the messages that queued beside it:
// one transaction, one multi-row insert, one lastValue/lastActivity update per
// variable and device. Its caller is answered only after that commit.
//
// A message that cannot join a batch is a batch of one, written by its caller's
// goroutine through the same code (writeJobs): one that creates a device or variable
// (resolved inside its transaction), names a disabled device, or is at least a whole
// batch by itself (bulk loads gain nothing from company). When a batch fails, each of
// its messages is retried as a batch of one, so one message's fault or a stale cache
// entry never fails another, and nothing is acknowledged uncommitted. Data the
// database would refuse (a data exception, SQLSTATE class 22) is refused in validation,
// before the queue (parse.go); should some reach a batch all the same, that retry
// leaves it to its own message, answered 400 (refused).
type Pipeline struct {
	store     *values.Store
	followers []Follower // told about every write of values (follow.go)
	conf      PipelineConfig
	devices   *cache.Cache[deviceKey, int64]   // (account, label) → key of an active device
	variables *cache.Cache[variableKey, int64] // (device key, label) → variable key
	queue     chan *job
	room      *semaphore.Weighted // dots queued or being committed
	metrics   *metrics.Metrics
	log       *slog.Logger
	moved     chan []string // last-value notifications of committed writes, for notifyLoop
	movedMu   sync.RWMutex  // held to send on moved; Run closes moved under it
	stopped   bool          // moved is closed: writers notify themselves
}

// PipelineConfig are the knobs of docs/operations.md.
type PipelineConfig struct {
	BatchDots     int           // a batch closes at this many dots; a message this large goes alone
	QueueDots     int           // dots waiting or committing, at most
	QueueWait     time.Duration // how long a message waits for room before a 503
	Committers    int           // batches committing at once
	CommitTimeout time.Duration // one batch's transaction, at most

	// Admit, when set, is asked before each message: an error refuses it whole (the
	// storage budget's 507, pkg/budget).
	Admit func() error

	// Horizon, when set, returns the raw horizon (retention, API.md §16; ok false: none):
	// a message with a dot before it is refused whole (400 naming "timestamp"), since
	// the raw values there were removed and only the rollup tiers answer for that
	// period. A dot written there would be raw data under the tiers that the next
	// retention run drops again.
	Horizon func(context.Context) (h time.Time, ok bool)

	// Written, when set, is called with the number of rows after each commit (metrics).
	Written func(n int)
}

type deviceKey struct {
	account int64
	label   string
}

type variableKey struct {
	device int64
	label  string
}

// job is one message on its way through the queue.
type job struct {
	dots    int        // its rows, for the queue's room and the batch size
	resolve resolver   // its rows, resolved already (queued) or in the transaction (alone)
	retry   resolver   // when its batch failed: resolve again, in the transaction
	done    chan error // nil, or errAlone
}

// errAlone tells a waiting caller that its batch failed: write the message alone.
var errAlone = errors.New("batch failed: write alone")

// Direct is a pipeline without queue, caches or followers that writes every message
// as a batch of one, in the caller's goroutine: for the benchmarks' data and floors.
// Without followers its writes neither refuse synthetic variables nor reach their
// dependents or events; a tool whose writes must (`sensorapi load`) writes through an
// instance's pipeline (server.StartWriter). It needs no Run.
func Direct(st *values.Store) *Pipeline {
	return &Pipeline{store: st, conf: PipelineConfig{BatchDots: 1}}
}

// NewPipeline wires the caches to invalidations; Run starts the committers.
func NewPipeline(store *values.Store, conf PipelineConfig, devices, variables cache.Options, inv *cache.Router,
	m *metrics.Metrics, log *slog.Logger) *Pipeline {
	p := &Pipeline{
		store: store, conf: conf, metrics: m, log: log,
		devices:   cache.New[deviceKey, int64](devices),
		variables: cache.New[variableKey, int64](variables),
		queue:     make(chan *job, conf.QueueDots), // every job holds ≥ 1 dot of room
		room:      semaphore.NewWeighted(int64(conf.QueueDots)),
		moved:     make(chan []string, movedQueue),
	}
	inv.On("device", func(i cache.Invalidation) { p.devices.Invalidate(deviceKey{i.Account, i.Label}) })
	inv.On("variable", func(i cache.Invalidation) { p.variables.Invalidate(variableKey{i.Device, i.Label}) })
	return p
}

// bounded gives a message's write (lookups, waiting for its batch, creation, retry
// alone) the bound a batch has, CommitTimeout, whatever its caller's context: a
// database that stopped answering (packets dropped, no reset: a network partition)
// then gets the writer a 503 within it, not a wait until the kernel gives the
// connection up (TestTCPFaults/blackhole). Bulk messages, written alone from the
// start, are bounded per statement only (statement_timeout).
func (p *Pipeline) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.conf.CommitTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.conf.CommitTimeout)
}

// Purge drops every cached device and variable.
func (p *Pipeline) Purge() {
	p.devices.Purge()
	p.variables.Purge()
}

// ToDevice writes dots whose Target is a variable label to the device with that label,
// creating the device and missing variables (name = label).
func (p *Pipeline) ToDevice(ctx context.Context, account int64, device string, dots []Dot) error {
	if err := p.admit(ctx, dots); err != nil {
		return err
	}
	inTx := deviceResolver(account, device, dots)
	if p.alone(dots) {
		return p.writeAlone(ctx, inTx)
	}
	ctx, cancel := p.bounded(ctx)
	defer cancel()
	rows, t, ok, err := p.resolveLabels(ctx, account, device, dots)
	switch {
	case err != nil:
		return err
	case !ok: // something to create: in the batch's transaction, as a new fleet's first messages come together
		return p.submit(ctx, &job{dots: len(dots), resolve: inTx, retry: inTx})
	}
	return p.submit(ctx, &job{dots: len(rows), resolve: resolved(rows, t), retry: inTx})
}

// ToVariableID writes dots to the variable with that public id (404 if the account
// has none).
func (p *Pipeline) ToVariableID(ctx context.Context, account int64, id string, dots []Dot) error {
	for i := range dots {
		dots[i].Target = id
	}
	return p.byID(ctx, account, dots, variableNotFound)
}

// ToCollection writes dots whose Target is a variable public id; an id the account
// does not hold is an invalid error naming the item, and nothing is written.
func (p *Pipeline) ToCollection(ctx context.Context, account int64, dots []Dot) error {
	return p.byID(ctx, account, dots, itemsNotFound)
}

// WriteResolved writes dots to variables already resolved (label → key) of a device,
// as a batch of one. It is the per-message floor that `make bench-fleet` measures the
// pipeline against: the service's statements without lookups or company.
func (p *Pipeline) WriteResolved(ctx context.Context, device int64, deviceLabel string, variables map[string]int64, dots []Dot) error {
	return p.writeAlone(ctx, resolved(deviceRows(dots, variables), newTargets(values.Ref{ID: device, Label: deviceLabel}, variables)))
}

// byID resolves public ids with one read (these routes carry ids, not the labels the
// caches hold) and queues the message.
func (p *Pipeline) byID(ctx context.Context, account int64, dots []Dot, missing notFound) error {
	if err := p.admit(ctx, dots); err != nil {
		return err
	}
	inTx := idResolver(account, dots, missing)
	if p.alone(dots) {
		return p.writeAlone(ctx, inTx)
	}
	ctx, cancel := p.bounded(ctx)
	defer cancel()
	rows, t, err := resolveIDs(ctx, p.store.Pool, account, dots, missing)
	if err != nil {
		return err
	}
	return p.submit(ctx, &job{dots: len(rows), resolve: resolved(rows, t), retry: inTx})
}

// admit refuses a message the storage budget or the raw horizon does not allow.
func (p *Pipeline) admit(ctx context.Context, dots []Dot) error {
	if p.conf.Admit != nil {
		if err := p.conf.Admit(); err != nil {
			return err
		}
	}
	return p.checkHorizon(ctx, dots)
}

// checkHorizon refuses a message holding a dot older than the raw horizon, naming
// the timestamp field (a request's ?timestamp gives dots without one theirs).
func (p *Pipeline) checkHorizon(ctx context.Context, dots []Dot) error {
	if p.conf.Horizon == nil || len(dots) == 0 {
		return nil
	}
	h, ok := p.conf.Horizon(ctx)
	if !ok {
		return nil
	}
	ms := h.UnixMilli()
	for _, d := range dots {
		if d.TS < ms {
			return fault.Invalid("timestamp", MsgHorizon(ms))
		}
	}
	return nil
}

// alone tells whether a message is written in a transaction of its own without
// queueing: an empty one (it may still create its device) or one of a batch or more.
func (p *Pipeline) alone(dots []Dot) bool { return len(dots) == 0 || len(dots) >= p.conf.BatchDots }

// resolveLabels maps the device label and the dots' variable labels to keys, from the
// caches or with one read that fills them. ok is false when the device or a variable is
// missing; a disabled device is its error (423), answered without a transaction (in a
// batch it would fail its batch-mates' write, every time it sends).
func (p *Pipeline) resolveLabels(ctx context.Context, account int64, device string, dots []Dot) ([]values.Row, values.Targets, bool, error) {
	labels := variableLabels(dots)
	ids := make(map[string]int64, len(labels))
	dev, cached := p.devices.Get(deviceKey{account, device})
	if cached {
		for _, l := range labels {
			if id, ok := p.variables.Get(variableKey{dev, l}); ok {
				ids[l] = id
			}
		}
	}
	if !cached || len(ids) < len(labels) {
		var found bool
		var err error
		if dev, found, err = p.lookup(ctx, account, device, labels, ids); err != nil || !found {
			return nil, values.Targets{}, false, err
		}
	}
	if len(ids) < len(labels) {
		return nil, values.Targets{}, false, nil
	}
	return deviceRows(dots, ids), newTargets(values.Ref{ID: dev, Label: device}, ids), true, nil
}

// lookup reads a device and those of its variables that carry the labels into ids, and
// caches what it found; a disabled device is fault.DeviceDisabled.
func (p *Pipeline) lookup(ctx context.Context, account int64, device string, labels []string,
	ids map[string]int64) (int64, bool, error) {
	dgen, vgen := p.devices.Begin(), p.variables.Begin()
	rows, err := p.store.Pool.Query(ctx, `SELECT d.id, d.is_active, v.id, v.label
		FROM devices d LEFT JOIN variables v ON v.device_id = d.id AND v.label = ANY($3)
		WHERE d.account_id = $1 AND d.label = $2`, account, device, labels)
	if err != nil {
		return 0, false, fmt.Errorf("look up device: %w", err)
	}
	var dev int64
	found, active := false, false
	for rows.Next() {
		var vid *int64
		var vlabel *string
		if err := rows.Scan(&dev, &active, &vid, &vlabel); err != nil {
			return 0, false, fmt.Errorf("look up device: %w", err)
		}
		if !active {
			rows.Close()
			return 0, false, fault.DeviceDisabled
		}
		found = true
		if vid != nil {
			ids[*vlabel] = *vid
			p.variables.Fill(vgen, variableKey{dev, *vlabel}, *vid)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("look up device: %w", err)
	}
	if found {
		p.devices.Fill(dgen, deviceKey{account, device}, dev)
	}
	return dev, found, nil
}

// submit queues the job, waiting up to QueueWait for room, and waits for its batch.
func (p *Pipeline) submit(ctx context.Context, j *job) error {
	n := int64(j.dots)
	wctx, cancel := context.WithTimeout(ctx, p.conf.QueueWait)
	err := p.room.Acquire(wctx, n)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.metrics.IngestRejected.Inc()
		return fault.QueueFull
	}
	j.done = make(chan error, 1)
	p.metrics.IngestQueued.Add(float64(n))
	p.queue <- j
	select {
	case err = <-j.done:
	case <-ctx.Done():
		return ctx.Err() // the batch still commits; nobody is left to tell
	}
	if errors.Is(err, errAlone) {
		return p.writeAlone(ctx, j.retry)
	}
	return err
}

// Run commits batches until ctx ends, then hands what is still queued back to its
// callers to write alone, and returns once the last notifications are sent. Call it
// once.
func (p *Pipeline) Run(ctx context.Context) {
	finished := make(chan struct{}, p.conf.Committers)
	for range p.conf.Committers {
		go func() { p.commitLoop(ctx); finished <- struct{}{} }()
	}
	notified := make(chan struct{})
	go func() { p.notifyLoop(); close(notified) }()
	for range p.conf.Committers {
		<-finished
	}
	for drained := false; !drained; {
		select {
		case j := <-p.queue:
			p.finish([]*job{j}, errAlone)
		default:
			drained = true
		}
	}
	p.movedMu.Lock()
	p.stopped = true
	close(p.moved)
	p.movedMu.Unlock()
	<-notified
}

// movedQueue is how many committed batches' notifications may wait for notifyLoop;
// past it a committer sends its own (it never drops them).
const movedQueue = 256

// notifyLoop sends the last-value notifications of committed batches, all those
// waiting in one transaction, off the committers' path: a committer answers its
// callers and takes the next batch while the previous one's notifications go out.
func (p *Pipeline) notifyLoop() {
	for payloads := range p.moved {
	more:
		for {
			select {
			case next, ok := <-p.moved:
				if !ok {
					break more
				}
				payloads = append(payloads, next...)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.conf.CommitTimeout)
		p.store.NotifyLastValues(ctx, payloads)
		cancel()
	}
}

// commitLoop takes the first job waiting, adds every job already queued behind it up
// to BatchDots, and commits them. A batch therefore closes when it is full or when
// this committer's previous commit returned: no timer adds latency at low load.
func (p *Pipeline) commitLoop(ctx context.Context) {
	var carry *job
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-p.queue:
			case <-ctx.Done():
				return
			}
		}
		jobs, dots := []*job{first}, first.dots
	fill:
		for dots < p.conf.BatchDots {
			select {
			case j := <-p.queue:
				if dots+j.dots > p.conf.BatchDots {
					carry = j
					break fill
				}
				jobs, dots = append(jobs, j), dots+j.dots
			default:
				break fill
			}
		}
		p.commit(jobs, dots)
	}
}

// commit writes the jobs in one transaction and answers each.
func (p *Pipeline) commit(jobs []*job, dots int) {
	ctx, cancel := context.WithTimeout(context.Background(), p.conf.CommitTimeout)
	defer cancel()
	start := time.Now()
	w, err := p.writeJobs(ctx, jobs)
	p.metrics.IngestCommitSeconds.Observe(time.Since(start).Seconds())
	p.metrics.IngestBatchMessages.Observe(float64(len(jobs)))
	if err != nil {
		p.metrics.IngestBatches.WithLabelValues("retried_alone").Inc()
		if errors.Is(err, values.ErrStale) {
			p.Purge() // a notification is on its way; do not wait for it
		}
		p.log.Warn("ingestion batch failed; its messages are written one by one",
			"messages", len(jobs), "dots", dots, "error", err.Error())
		p.finish(jobs, errAlone)
		return
	}
	p.metrics.IngestBatches.WithLabelValues("committed").Inc()
	p.finish(jobs, nil)
	p.committed(w.changes)
	p.handOff(ctx, w.moved)
}

// writeAlone writes one message as a batch of one, retried on a deadlock or
// serialization failure (concurrent writers to overlapping variables), and when a
// device or variable resolved for it was deleted or changed before the write locked it.
func (p *Pipeline) writeAlone(ctx context.Context, r resolver) error {
	j := []*job{{resolve: r}}
	var w written
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		if w, err = p.writeJobs(ctx, j); !retryable(err) {
			break
		}
	}
	if err != nil {
		return p.refused(err)
	}
	p.committed(w.changes)
	p.handOff(ctx, w.moved)
	return nil
}

// handOff gives a committed write's last-value notifications to notifyLoop, the one
// connection that notifies: PostgreSQL serializes notifying transactions (a lock held
// from pre-commit through the WAL flush), so writers that each notified, such as a new
// fleet's first messages (written alone: they create their devices), waited for each
// other's commits in line (bench-fleet: a fresh account at a tenth of an established
// one's rate). When notifyLoop is behind, stopped or not running (Direct), the writer
// sends them itself rather than drop them.
func (p *Pipeline) handOff(ctx context.Context, payloads []string) {
	if len(payloads) > 0 && !p.queueMoved(payloads) {
		p.store.NotifyLastValues(ctx, payloads)
	}
}

// queueMoved queues payloads for notifyLoop unless its queue is full or closed.
func (p *Pipeline) queueMoved(payloads []string) bool {
	p.movedMu.RLock()
	defer p.movedMu.RUnlock()
	if p.stopped || p.moved == nil {
		return false
	}
	select {
	case p.moved <- payloads:
		return true
	default:
		return false
	}
}

// refused answers a message's failed write. A data exception (SQLSTATE class 22) is
// the message's fault: a 400 (MQTT 5: 0x99; a client told that the server failed sends
// it again and again), logged because validation (parse.go) should have named its
// field. A batch it failed was written again message by message (commit), so only the
// message that holds the bad data meets it here.
func (p *Pipeline) refused(err error) error {
	ae := fault.DataException(err)
	if ae == nil {
		return err
	}
	log := p.log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("ingestion: the database refused a message's data that validation let through", "error", err.Error())
	return ae
}

// written is what a committed transaction of writeJobs did: the last-value
// notifications to send and the changes for the store's followers.
type written struct {
	moved   []string
	changes []Change
}

// writeJobs writes the jobs' rows in one transaction: each job resolves its rows in
// it (queue order: a later message wins a (variable, ts)). It returns the last-value
// notifications to send and the changes to tell followers once committed.
func (p *Pipeline) writeJobs(ctx context.Context, jobs []*job) (written, error) {
	var w written
	var n int
	err := pgx.BeginFunc(ctx, p.store.Pool, func(tx pgx.Tx) error {
		var rows []values.Row
		t := values.Targets{Variables: map[int64]string{}}
		for _, j := range jobs {
			r, jt, err := j.resolve(ctx, tx)
			if err != nil {
				return err
			}
			rows = append(rows, r...)
			t.Add(jt)
		}
		vw, err := values.Write(ctx, tx, rows, t, p.watches)
		if err != nil {
			return err
		}
		n, w.moved, w.changes = len(vw.Rows), vw.Moved, changesOf(vw.Rows, vw.Prev)
		return p.mark(ctx, tx, w.changes)
	})
	if err == nil && p.conf.Written != nil {
		p.conf.Written(n)
	}
	return w, err
}

// watches tells whether a follower watches the variable (Watcher).
func (p *Pipeline) watches(variable int64) bool {
	for _, f := range p.followers {
		if w, ok := f.(Watcher); ok && w.Watches(variable) {
			return true
		}
	}
	return false
}

// finish answers the jobs and frees their room.
func (p *Pipeline) finish(jobs []*job, err error) {
	var n int64
	for _, j := range jobs {
		j.done <- err
		n += int64(j.dots)
	}
	p.room.Release(n)
	p.metrics.IngestQueued.Sub(float64(n))
}

// Delete removes a variable's values in the range (values.Store.Delete), telling the
// pipeline's followers.
func (p *Pipeline) Delete(ctx context.Context, key int64, r values.Range) error {
	start, end := r.Bounds()
	changes := []Change{{Variable: key, From: start.UnixMilli(), To: end.UnixMilli(), Deleted: true}}
	err := p.store.Delete(ctx, key, r, func(ctx context.Context, tx pgx.Tx) error { return p.mark(ctx, tx, changes) })
	if err == nil {
		p.committed(changes)
	}
	return err
}

// Follow adds a follower of every write (follow.go). Call it before Run.
func (p *Pipeline) Follow(f Follower) { p.followers = append(p.followers, f) }
