package events

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/ingest"
)

// Evaluation in memory (docs/events.md "How each transition runs its actions once").
//
// Each evaluator owns a shard of the watched variables (key modulo the evaluators) and
// keeps, for each event of its variables, an entry: the event's settings and its state
// machine after every value this instance evaluated, over the stored row at a version
// (xmin). A write through the pipeline hands the evaluator its rows and its place in
// the variable's chain of writes (ingest.Change.Prev: the variable's newest timestamp
// before the write, read under the variable row's lock that every write takes). When
// the chain continues from the entry's last evaluated value, no value committed by
// anyone is missing between the two, and the rows are evaluated in memory: no
// database work unless a state changes. A transition is saved at once, over the
// version the entry extends (else the entry is dropped and the event evaluated from the
// database), with its deliveries in the same transaction; the rest (the last value
// evaluated, the start or end of a run) is saved by the shard's periodic flush, also
// over the version, so that a flush that finds the row moved (another instance, a
// PATCH) drops the entry and evaluates the event from the database: the values are
// there, and a state re-evaluated from a stored one and the values after it reaches the
// same transitions. A chain broken (another instance wrote the variable, a write lost
// to a full queue, a delete) waits one round for the missing write, then falls back to
// the database too.

// entry is an event as its evaluator knows it.
type entry struct {
	ev      Event  // settings and labels
	st      State  // after every value evaluated here
	version string // xmin of the stored row st extends
	dirty   bool   // st moved past the stored row (bookkeeping the flush saves)
}

// item is one piece of work for a shard.
type item struct {
	variable int64
	change   *ingest.Change // a write to evaluate in memory; nil: evaluate from the database
	sweep    bool           // from the sweep: only events whose entry has not reached lastValue
	last     int64          // the variable's last value (sweep)
}

// shard is one evaluator's variables; only its goroutine touches entries and held.
type shard struct {
	in      chan item
	entries map[int64]*entry           // event key → entry
	held    map[int64][]*ingest.Change // variable → writes after a gap, waiting one round
	epoch   uint64

	staleMu sync.Mutex
	stale   map[int64]bool // accounts whose events, devices or variables changed since the last round
}

func newShard() *shard {
	return &shard{in: make(chan item, 10_000), entries: map[int64]*entry{}, held: map[int64][]*ingest.Change{},
		stale: map[int64]bool{}}
}

// markStale records that an account's events, devices or variables changed: its
// entries are read again from the next round on (any goroutine).
func (sh *shard) markStale(account int64) {
	sh.staleMu.Lock()
	sh.stale[account] = true
	sh.staleMu.Unlock()
}

// dropStale drops the entries that changes since the last round made stale: every
// entry when the service's epoch moved, else those of the accounts marked.
func (sh *shard) dropStale(epoch uint64) {
	sh.staleMu.Lock()
	stale := sh.stale
	sh.stale = map[int64]bool{}
	sh.staleMu.Unlock()
	if epoch != sh.epoch {
		clear(sh.entries)
		sh.epoch = epoch
		return
	}
	for id, e := range sh.entries {
		if stale[e.ev.AccountID] {
			delete(sh.entries, id)
		}
	}
}

// shardOf is the shard of a variable.
func (s *Service) shardOf(variable int64) *shard {
	return s.shards[uint64(variable)%uint64(len(s.shards))]
}

// send queues an item without blocking: with the shard's queue full it is dropped, and
// the next write of the variable (a broken chain) or the sweep catches up.
func (s *Service) send(it item) {
	select {
	case s.shardOf(it.variable).in <- it:
	default:
	}
}

// shardLoop evaluates the shard's items until ctx ends: the items waiting are taken
// together (lingering evaluationLinger for more), and the entries' bookkeeping is
// flushed every flushEvery; a last flush runs on the way out.
func (s *Service) shardLoop(ctx context.Context, sh *shard) {
	flush := time.NewTicker(s.flushEvery())
	defer flush.Stop()
	for {
		var items []item
		var again <-chan time.Time // held writes: look again after a linger even without news
		if len(sh.held) > 0 {
			again = time.After(evaluationLinger)
		}
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.flush(fctx, sh)
			cancel()
			return
		case <-flush.C:
			s.flush(ctx, sh)
			continue
		case it := <-sh.in:
			items = append(items, it)
		case <-again:
		}
		linger := time.NewTimer(evaluationLinger)
	more:
		for len(items) < 4*maxBatch {
			select {
			case it := <-sh.in:
				items = append(items, it)
			case <-linger.C:
				break more
			case <-ctx.Done():
				break more
			}
		}
		linger.Stop()
		s.process(ctx, sh, items)
	}
}

// flushEvery is the period of a shard's flush of bookkeeping.
func (s *Service) flushEvery() time.Duration { return s.cfg.Sweep }

// chained tells whether a write continues the chain from last, the newest value
// evaluated: its variable's newest timestamp before it was last.
func chained(c *ingest.Change, last *int64) bool {
	if last == nil {
		return !c.HasPrev
	}
	return c.HasPrev && c.Prev == *last
}

// saving is a transition (or several) found in memory, to save over the entry's version.
type saving struct {
	e     *entry
	st    State
	fired []transition
}

// process evaluates a round of items: writes in memory where the chain allows, the
// rest from the database.
func (s *Service) process(ctx context.Context, sh *shard, items []item) {
	// 1. entries of events changed since the shard's last round are read again (dropStale)
	sh.dropStale(s.epoch.Load())
	watched := *s.watched.Load()
	// 2. the round's writes by variable, and the events to evaluate from the database (gather)
	held := sh.held
	sh.held = map[int64][]*ingest.Change{}
	writes, fromDB := sh.gather(items, held, watched)
	// 3. each variable's writes evaluated in memory, in chain order (inMemory)
	var saves []saving
	memory := 0
	for v, cs := range writes {
		sv, n := sh.inMemory(v, cs, held[v] != nil, watched[v], fromDB)
		saves, memory = append(saves, sv...), memory+n
	}
	s.metrics.evaluations.WithLabelValues("memory").Add(float64(memory))
	// 4. transitions saved at once; those not saved go to the database (saveTransitions)
	if len(saves) > 0 {
		if err := s.saveTransitions(ctx, saves); err != nil {
			if !errors.Is(err, errConflict) && ctx.Err() == nil {
				s.log.Warn("event transitions not saved; evaluating from the database", "error", err.Error())
			}
			for _, sv := range saves {
				delete(sh.entries, sv.e.ev.ID)
				fromDB[sv.e.ev.ID] = true
			}
		}
	}
	// 5. the rest from the database, in key order (evaluateFromDB)
	if len(fromDB) > 0 {
		s.evaluateFromDB(ctx, sh, slices.Sorted(maps.Keys(fromDB)))
	}
}

// gather sorts a round's items: the writes by variable (after those held from the
// last round) and the events to evaluate from the database (a sweep's events whose
// entry has not reached the variable's last value; every event of an item without a
// write).
func (sh *shard) gather(items []item, held map[int64][]*ingest.Change, watched map[int64][]int64) (
	writes map[int64][]*ingest.Change, fromDB map[int64]bool) {
	writes = map[int64][]*ingest.Change{}
	for v, cs := range held {
		writes[v] = cs
	}
	fromDB = map[int64]bool{} // event keys
	for _, it := range items {
		switch {
		case it.change != nil:
			writes[it.variable] = append(writes[it.variable], it.change)
		case it.sweep:
			for _, id := range watched[it.variable] {
				if e := sh.entries[id]; e == nil || e.st.LastTS == nil || *e.st.LastTS < it.last {
					fromDB[id] = true
				}
			}
		default:
			for _, id := range watched[it.variable] {
				fromDB[id] = true
			}
		}
	}
	return writes, fromDB
}

// inMemory evaluates a variable's writes cs for its events, each from its entry, while
// the writes continue the entry's chain. An event without an entry, or whose chain
// broke after the writes had waited a round already, goes to fromDB; writes after a
// first break wait a round (sh.held). It returns the transitions to save and how many
// events it evaluated; an entry that moved without a transition is marked dirty.
func (sh *shard) inMemory(v int64, cs []*ingest.Change, waited bool, events []int64, fromDB map[int64]bool) (
	saves []saving, memory int) {
	sortChain(cs)
	hold := len(cs)
	for _, id := range events {
		e := sh.entries[id]
		if e == nil || fromDB[id] {
			fromDB[id] = true
			continue
		}
		st, fired, stepped, gap := e.stepChain(cs)
		if gap < len(cs) {
			if waited { // the database has them
				fromDB[id] = true
			}
			hold = min(hold, gap)
		}
		if fromDB[id] || !stepped {
			continue
		}
		memory++
		switch {
		case len(fired) > 0:
			saves = append(saves, saving{e: e, st: st, fired: fired})
		case !sameState(st, e.st):
			e.st, e.dirty = st, true
		}
	}
	if hold < len(cs) && !waited {
		sh.held[v] = cs[hold:]
	}
	return saves, memory
}

// sortChain orders a variable's writes along its chain: a first write (no previous
// value) first, then by the timestamp each continues from.
func sortChain(cs []*ingest.Change) {
	slices.SortFunc(cs, func(a, b *ingest.Change) int {
		if a.HasPrev != b.HasPrev {
			if a.HasPrev {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Prev, b.Prev), cmp.Compare(a.To, b.To))
	})
}

// stepChain steps a copy of the entry's state through the writes that continue its
// chain (skipping those it has evaluated): fired are the transitions, stepped whether
// any write was evaluated, gap the index of the first write that does not continue the
// chain (len(cs) if none).
func (e *entry) stepChain(cs []*ingest.Change) (st State, fired []transition, stepped bool, gap int) {
	st, c := e.st, e.ev.condition()
	for i, w := range cs {
		if st.LastTS != nil && w.To <= *st.LastTS {
			continue // nothing newer than the values evaluated
		}
		if !chained(w, st.LastTS) {
			return st, fired, stepped, i
		}
		stepped = true
		for _, p := range w.Values {
			if to := st.Step(c, p.TS, p.Value); to != "" {
				fired = append(fired, transition{state: to, ts: p.TS, value: p.Value})
			}
		}
	}
	return st, fired, stepped, len(cs)
}

// sameState tells whether two states are the same.
func sameState(a, b State) bool {
	eq := func(x, y *int64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.State == b.State && eq(a.RunSince, b.RunSince) && eq(a.LastTS, b.LastTS)
}

// saveTransitions saves the states with transitions found in memory, each over the
// version its entry extends, with their deliveries, in one transaction; any row moved
// meanwhile (errConflict) rolls it all back. On success the entries hold the new
// states and versions.
func (s *Service) saveTransitions(ctx context.Context, saves []saving) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	slices.SortFunc(saves, func(a, b saving) int { return cmp.Compare(a.e.ev.ID, b.e.ev.ID) })
	versions := make([]string, len(saves))
	fired := map[string]int{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		u := stateUpdate{}
		var ds []delivery
		for _, sv := range saves {
			e := sv.e.ev // its settings version: as read with the entry
			e.version = sv.e.version
			u.add(&e, sv.st, true)
			for _, t := range sv.fired {
				ds = append(ds, e.deliveries(t)...)
				fired[t.state]++
			}
		}
		if err := u.save(ctx, tx, false, versions); err != nil {
			return err
		}
		return s.insertDeliveries(ctx, tx, ds)
	})
	if err != nil {
		return err
	}
	for i, sv := range saves {
		sv.e.st, sv.e.version, sv.e.dirty = sv.st, versions[i], false
	}
	for state, n := range fired {
		s.metrics.transitions.WithLabelValues(state).Add(float64(n))
	}
	return nil
}

// evaluateFromDB evaluates events from their stored states and the stored values
// (evaluate), and makes entries of the results.
func (s *Service) evaluateFromDB(ctx context.Context, sh *shard, ids []int64) {
	s.metrics.evaluations.WithLabelValues("database").Add(float64(len(ids)))
	for len(ids) > 0 {
		n := min(len(ids), maxBatch)
		batch := ids[:n]
		ids = ids[n:]
		again, results, err := s.evaluate(ctx, batch)
		for _, id := range batch {
			delete(sh.entries, id) // inactive, deleted, or not evaluated: no entry
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("event evaluation failed; the sweep retries it", "events", n, "error", err.Error())
			}
			continue
		}
		for _, r := range results {
			sh.entries[r.ev.ID] = &entry{ev: r.ev, st: r.st, version: r.version}
		}
		for _, v := range again {
			s.enqueue(v)
		}
	}
}

// flush saves the bookkeeping of the shard's entries (the last value evaluated, the
// start or end of a run: never a transition, saved at once) over their versions, in one
// transaction that does not wait for the WAL flush (lost in a crash, it is recomputed
// from the same values). An entry whose row moved meanwhile is dropped and its event
// evaluated from the database.
func (s *Service) flush(ctx context.Context, sh *shard) {
	var ids []int64
	for id, e := range sh.entries {
		if e.dirty {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids) // rows in key order, as every writer of them
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	versions := make([]string, len(ids))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SET LOCAL synchronous_commit = off")
		for i, id := range ids {
			e := sh.entries[id]
			b.Queue(`UPDATE event_states SET run_since = $2, last_ts = $3
				WHERE event_id = $1 AND xmin::text = $4 RETURNING xmin::text`,
				id, e.st.RunSince, e.st.LastTS, e.version).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&versions[i]); err != nil {
						return err
					}
				}
				return rows.Err()
			})
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("save event bookkeeping; retried at the next flush", "events", len(ids), "error", err.Error())
		}
		return
	}
	for i, id := range ids {
		e := sh.entries[id]
		if versions[i] == "" { // moved by another instance or a PATCH: read it again
			delete(sh.entries, id)
			s.enqueue(e.ev.VariableID)
			continue
		}
		e.version, e.dirty = versions[i], false
	}
}
