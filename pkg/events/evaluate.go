package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/values"
)

// Mark is a no-op: the values themselves are the durable to-do. An evaluation missed
// by a crash after the commit is caught up by the next write of the variable or by
// the sweep, which compares each event's last evaluated time with its variable's
// last value.
func (s *Service) Mark(context.Context, pgx.Tx, []ingest.Change) error { return nil }

// Watches tells the pipeline which variables' writes carry their rows and chain
// (ingest.Watcher): those with active events.
func (s *Service) Watches(variable int64) bool { return len((*s.watched.Load())[variable]) > 0 }

// Committed hands the writes of variables with active events to their evaluators:
// in memory when they carry their rows (memory.go), else from the database. It never
// blocks: when a queue is full the next write or the sweep catches up.
func (s *Service) Committed(changes []ingest.Change) {
	watched := *s.watched.Load()
	for i := range changes {
		c := &changes[i]
		if len(watched[c.Variable]) == 0 {
			continue
		}
		if c.Deleted || c.Values == nil {
			s.enqueue(c.Variable)
			continue
		}
		s.send(item{variable: c.Variable, change: c})
	}
}

// enqueue asks for the events of a variable to be evaluated from the database.
func (s *Service) enqueue(variable int64) { s.send(item{variable: variable}) }

// maxBatch bounds the events one evaluation transaction takes.
const maxBatch = 256

// evaluationLinger is how long an evaluator waits for more writes after the first:
// at most ~100 rounds per second per evaluator under load.
const evaluationLinger = 10 * time.Millisecond

// batchValues bounds the values of one event one evaluation reads; more wait for the
// next one.
const batchValues = 5000

// transition is a state change caused by one value.
type transition struct {
	state string
	ts    int64
	value float64
}

// evaluated is an event's state machine after an evaluation from the database, over
// the stored row at version.
type evaluated struct {
	ev      Event
	st      State
	version string
}

// evaluate runs the state machines of events over the values of their variables
// committed since their last evaluation, in one transaction: read the events' states,
// read each one's new values in timestamp order, step, save the states if no other
// evaluation saved one meanwhile (else start again), insert each transition's
// deliveries (rows and River jobs), commit. again lists the variables with values
// left over; results the active events' states and versions after the commit.
func (s *Service) evaluate(ctx context.Context, ids []int64) (again []int64, results []evaluated, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	fired := map[string]int{}
	for attempt := 0; ; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			results, err = s.evaluateTx(ctx, tx, ids, fired, &again)
			return err
		})
		if !errors.Is(err, errConflict) || attempt == 9 {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	for state, n := range fired {
		s.metrics.transitions.WithLabelValues(state).Add(float64(n))
	}
	return again, results, nil
}

// errConflict: another evaluation (or a PATCH) saved one of the states since this one
// read it; evaluate again from the new state.
var errConflict = errors.New("event state changed concurrently")

// evaluateTx is one attempt of evaluate, in tx.
func (s *Service) evaluateTx(ctx context.Context, tx pgx.Tx, ids []int64, fired map[string]int, again *[]int64) ([]evaluated, error) {
	clear(fired)
	*again = (*again)[:0]
	evs, err := readEvents(ctx, tx, ids)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	vals, err := readValues(ctx, tx, evs)
	if err != nil {
		return nil, err
	}
	u := stateUpdate{}
	var deliveries []delivery
	results := make([]evaluated, len(evs))
	saved := map[int64]int{} // event key → index in u
	for i := range evs {
		e := &evs[i]
		results[i] = evaluated{ev: *e, st: State{State: e.State, RunSince: e.RunSince, LastTS: e.LastTS}, version: e.version}
		vs := vals[e.ID]
		if len(vs) == 0 {
			continue
		}
		if len(vs) == batchValues {
			*again = append(*again, e.VariableID)
		}
		st := State{State: e.State, RunSince: e.RunSince, LastTS: e.LastTS}
		c := e.condition()
		changed := false
		for _, v := range vs {
			to := st.Step(c, v.ts, v.value)
			if to == "" {
				continue
			}
			changed = true
			fired[to]++
			deliveries = append(deliveries, e.deliveries(transition{state: to, ts: v.ts, value: v.value})...)
		}
		saved[e.ID] = len(u.ids)
		results[i].st = st
		u.add(e, st, changed)
	}
	// Without a transition the new state is bookkeeping (last evaluated time, start
	// of the current run) that the same values recompute: lost in a crash, they are
	// evaluated again with the same result. Its commit need not wait for the WAL
	// flush (nor for a synchronous standby); one with deliveries does.
	versions := make([]string, len(u.ids))
	if err := u.save(ctx, tx, len(deliveries) == 0, versions); err != nil {
		return nil, err
	}
	for i := range results {
		if j, ok := saved[results[i].ev.ID]; ok {
			results[i].version = versions[j]
		}
	}
	return results, s.insertDeliveries(ctx, tx, deliveries)
}

// readEvents reads the states of the active events among ids with their settings
// and each state row's version (xmin), which saving compares: optimistic, so that an
// evaluation writes each state row once (no row lock before the update).
func readEvents(ctx context.Context, tx pgx.Tx, ids []int64) ([]Event, error) {
	rows, err := tx.Query(ctx, `SELECT e.id, e.account_id, e.label, e.variable_id, e.operator, e.threshold,
			e.duration_ms, e.actions, e.back_to_normal, s.state, s.run_since, s.last_ts, d.label, v.label,
			s.xmin::text, e.xmin::text
		FROM event_states s JOIN events e ON e.id = s.event_id
			JOIN variables v ON v.id = e.variable_id JOIN devices d ON d.id = v.device_id
		WHERE s.event_id = ANY($1) AND e.is_active ORDER BY s.event_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var actions, back []byte
		if err := r.Scan(&e.ID, &e.AccountID, &e.Label, &e.VariableID, &e.Operator, &e.Threshold, &e.DurationMS,
			&actions, &back, &e.State, &e.RunSince, &e.LastTS, &e.DeviceLabel, &e.VariableLabel, &e.version, &e.settings); err != nil {
			return e, err
		}
		if err := json.Unmarshal(actions, &e.Actions); err != nil {
			return e, err
		}
		return e, json.Unmarshal(back, &e.BackToNormal)
	})
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return evs, nil
}

// value is one stored value.
type value struct {
	ts    int64
	value float64
}

// readValues reads each event's values newer than its last evaluated one, oldest
// first, at most batchValues each (values.After).
func readValues(ctx context.Context, tx pgx.Tx, evs []Event) (map[int64][]value, error) {
	ids, vars, after := make([]int64, len(evs)), make([]int64, len(evs)), make([]time.Time, len(evs))
	for i, e := range evs {
		ids[i], vars[i] = e.ID, e.VariableID
		if e.LastTS != nil {
			after[i] = time.UnixMilli(*e.LastTS).UTC()
		}
	}
	out := map[int64][]value{}
	err := values.After(ctx, tx, ids, vars, after, batchValues, func(id, ts int64, v float64) {
		out[id] = append(out[id], value{ts: ts, value: v})
	})
	if err != nil {
		return nil, fmt.Errorf("read values: %w", err)
	}
	return out, nil
}

// stateUpdate collects the new states of a batch, saved with one statement.
type stateUpdate struct {
	ids      []int64
	versions []string
	settings []string
	states   []string
	since    []*int64
	last     []*int64
	changed  []bool
}

func (u *stateUpdate) add(e *Event, st State, changed bool) {
	u.ids = append(u.ids, e.ID)
	u.versions = append(u.versions, e.version)
	u.settings = append(u.settings, e.settings)
	u.states = append(u.states, st.State)
	u.since = append(u.since, st.RunSince)
	u.last = append(u.last, st.LastTS)
	u.changed = append(u.changed, changed)
}

// save writes the states, each only over the version read, and sets versions[i] to
// the new version of row i.
func (u *stateUpdate) save(ctx context.Context, tx pgx.Tx, bookkeeping bool, versions []string) error {
	if len(u.ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if bookkeeping {
		b.Queue("SET LOCAL synchronous_commit = off")
	}
	// Only rows still at the version read, of events still active with the settings
	// read: a concurrent evaluation or PATCH that saved one first makes this attempt
	// start again (errConflict). One statement per row,
	// in key order (ids are sorted), so that concurrent evaluations lock rows in the
	// same order (an UPDATE … FROM takes them in its join's order and can deadlock).
	for i := range u.ids {
		b.Queue(`UPDATE event_states SET state = $2, run_since = $3, last_ts = $4,
			changed_at = CASE WHEN $5 THEN now() ELSE changed_at END
			WHERE event_id = $1 AND xmin::text = $6
			AND EXISTS (SELECT FROM events WHERE id = $1 AND is_active AND xmin::text = $7)
			RETURNING xmin::text`,
			u.ids[i], u.states[i], u.since[i], u.last[i], u.changed[i], u.versions[i], u.settings[i]).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&versions[i]); err != nil {
					return err
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if versions[i] == "" {
				return errConflict
			}
			return nil
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, errConflict) {
			return errConflict
		}
		return fmt.Errorf("save event states: %w", err)
	}
	return nil
}

// delivery is one action of a transition, rendered.
type delivery struct {
	event      int64
	index      int
	actionType string
	transition string
	request    []byte
}

// deliveries renders the actions of a transition.
func (e *Event) deliveries(t transition) []delivery {
	as := e.Actions
	if t.state == Normal {
		as = e.BackToNormal
	}
	vars := Vars{Value: t.value, Timestamp: t.ts, Device: e.DeviceLabel, Variable: e.VariableLabel,
		Event: e.Label, State: t.state}
	out := make([]delivery, 0, len(as))
	for i, a := range as {
		req, _ := json.Marshal(a.render(vars)) // strings and numbers only: cannot fail
		out = append(out, delivery{event: e.ID, index: i, actionType: a.Type, transition: t.state, request: req})
	}
	return out
}

// insertDeliveries inserts the deliveries' rows and their River jobs in the
// evaluating transaction.
func (s *Service) insertDeliveries(ctx context.Context, tx pgx.Tx, ds []delivery) error {
	if len(ds) == 0 {
		return nil
	}
	events, idx, types, trans, reqs := make([]int64, len(ds)), make([]int32, len(ds)), make([]string, len(ds)),
		make([]string, len(ds)), make([]string, len(ds))
	for i, d := range ds {
		events[i], idx[i], types[i], trans[i], reqs[i] = d.event, int32(d.index), d.actionType, d.transition, string(d.request)
	}
	rows, err := tx.Query(ctx, `INSERT INTO event_deliveries (event_id, action_index, action_type, transition, request)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::jsonb[])
		RETURNING id, public_id`, events, idx, types, trans, reqs)
	if err != nil {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	var jobs []river.InsertManyParams
	var id int64
	var pub string
	if _, err := pgx.ForEachRow(rows, []any{&id, &pub}, func() error {
		jobs = append(jobs, river.InsertManyParams{Args: DeliveryArgs{Delivery: id, ID: pub},
			InsertOpts: &river.InsertOpts{Queue: queueName, MaxAttempts: maxAttempts}})
		return nil
	}); err != nil {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	if _, err := s.river.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueue deliveries: %w", err)
	}
	return nil
}
