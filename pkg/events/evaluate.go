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
)

// Mark is a no-op: the values themselves are the durable to-do. An evaluation missed
// by a crash after the commit is caught up by the next write of the variable or by
// the sweep, which compares each event's last evaluated time with its variable's
// last value.
func (s *Service) Mark(context.Context, pgx.Tx, []ingest.Change) error { return nil }

// Committed wakes the evaluator for the variables written that have active events.
// It never blocks: when the queue is full the sweep catches up.
func (s *Service) Committed(changes []ingest.Change) {
	watched := *s.watched.Load()
	for _, c := range changes {
		if c.Deleted || len(watched[c.Variable]) == 0 {
			continue
		}
		s.enqueue(c.Variable)
	}
}

// enqueue queues a variable for evaluation once (a variable already queued is not
// queued again: its evaluation will read every value committed by then).
func (s *Service) enqueue(variable int64) {
	s.mu.Lock()
	if s.queued[variable] {
		s.mu.Unlock()
		return
	}
	s.queued[variable] = true
	s.mu.Unlock()
	select {
	case s.queue <- variable:
	default:
		s.mu.Lock()
		delete(s.queued, variable)
		s.mu.Unlock()
	}
}

// evaluateLoop evaluates queued variables until ctx ends.
func (s *Service) evaluateLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-s.queue:
			s.mu.Lock()
			delete(s.queued, v)
			s.mu.Unlock()
			for _, id := range (*s.watched.Load())[v] {
				more, err := s.evaluate(ctx, id)
				if err != nil {
					if ctx.Err() == nil {
						s.log.Warn("event evaluation failed; the sweep retries it", "event", id, "error", err.Error())
					}
					continue
				}
				if more {
					s.enqueue(v)
				}
			}
		}
	}
}

// batchValues bounds the values one evaluation transaction reads; more wait for the
// next one.
const batchValues = 5000

// transition is a state change caused by one value.
type transition struct {
	state string
	ts    int64
	value float64
}

// evaluate runs one event's state machine over the values of its variable committed
// since its last evaluation, in one transaction: lock the event's row, read the
// values in timestamp order, step, insert each transition's deliveries (rows and
// River jobs), save the state, commit. more tells that values remain.
func (s *Service) evaluate(ctx context.Context, eventID int64) (more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	var fired []transition
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var e Event
		var actions, back []byte
		err := tx.QueryRow(ctx, `SELECT e.account_id, e.label, e.is_active, e.variable_id, e.operator, e.threshold,
				e.duration_ms, e.actions, e.back_to_normal, e.state, e.run_since, e.last_ts, d.label, v.label
			FROM events e JOIN variables v ON v.id = e.variable_id JOIN devices d ON d.id = v.device_id
			WHERE e.id = $1 FOR UPDATE OF e`, eventID).Scan(&e.AccountID, &e.Label, &e.IsActive, &e.VariableID,
			&e.Operator, &e.Threshold, &e.DurationMS, &actions, &back, &e.State, &e.RunSince, &e.LastTS,
			&e.DeviceLabel, &e.VariableLabel)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !e.IsActive) {
			return nil // deleted or disabled since it was queued
		}
		if err != nil {
			return fmt.Errorf("lock event: %w", err)
		}
		if err := json.Unmarshal(actions, &e.Actions); err != nil {
			return fmt.Errorf("read actions: %w", err)
		}
		if err := json.Unmarshal(back, &e.BackToNormal); err != nil {
			return fmt.Errorf("read actions: %w", err)
		}
		var after time.Time
		if e.LastTS != nil {
			after = time.UnixMilli(*e.LastTS).UTC()
		}
		st := State{State: e.State, RunSince: e.RunSince, LastTS: e.LastTS}
		c := e.condition()
		vals, err := readValues(ctx, tx, e.VariableID, after)
		if err != nil {
			return err
		}
		n := len(vals)
		for _, v := range vals {
			if to := st.Step(c, v.ts, v.value); to != "" {
				fired = append(fired, transition{state: to, ts: v.ts, value: v.value})
			}
		}
		if n == 0 {
			return nil
		}
		more = n == batchValues
		for _, t := range fired {
			if err := s.enqueueDeliveries(ctx, tx, eventID, &e, t); err != nil {
				return err
			}
		}
		changed := len(fired) > 0
		_, err = tx.Exec(ctx, `UPDATE events SET state = $2, run_since = $3, last_ts = $4,
			state_changed_at = CASE WHEN $5 THEN now() ELSE state_changed_at END WHERE id = $1`,
			eventID, st.State, st.RunSince, st.LastTS, changed)
		if err != nil {
			return fmt.Errorf("save event state: %w", err)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, t := range fired {
		s.metrics.transitions.WithLabelValues(t.state).Inc()
	}
	return more, nil
}

// value is one stored value.
type value struct {
	ts    int64
	value float64
}

// readValues reads the variable's values after a time, oldest first, at most
// batchValues.
func readValues(ctx context.Context, tx pgx.Tx, variable int64, after time.Time) ([]value, error) {
	rows, err := tx.Query(ctx, `SELECT (extract(epoch FROM ts) * 1000)::bigint, value FROM "values"
		WHERE variable_id = $1 AND ts > $2 ORDER BY ts LIMIT $3`, variable, after, batchValues)
	if err != nil {
		return nil, fmt.Errorf("read values: %w", err)
	}
	vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (value, error) {
		var v value
		err := r.Scan(&v.ts, &v.value)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read values: %w", err)
	}
	return vals, nil
}

// enqueueDeliveries inserts one delivery per action of a transition, each with its
// River job, in the evaluating transaction.
func (s *Service) enqueueDeliveries(ctx context.Context, tx pgx.Tx, eventID int64, e *Event, t transition) error {
	as := e.Actions
	if t.state == Normal {
		as = e.BackToNormal
	}
	vars := Vars{Value: t.value, Timestamp: t.ts, Device: e.DeviceLabel, Variable: e.VariableLabel,
		Event: e.Label, State: t.state}
	var jobs []river.InsertManyParams
	for i, a := range as {
		req, err := json.Marshal(a.render(vars))
		if err != nil {
			return fmt.Errorf("render action: %w", err)
		}
		var id int64
		var pub string
		err = tx.QueryRow(ctx, `INSERT INTO event_deliveries (event_id, action_index, action_type, transition, request)
			VALUES ($1, $2, $3, $4, $5) RETURNING id, public_id`, eventID, i, a.Type, t.state, req).Scan(&id, &pub)
		if err != nil {
			return fmt.Errorf("insert delivery: %w", err)
		}
		jobs = append(jobs, river.InsertManyParams{Args: DeliveryArgs{Delivery: id, ID: pub},
			InsertOpts: &river.InsertOpts{Queue: queueName, MaxAttempts: maxAttempts}})
	}
	if len(jobs) == 0 {
		return nil
	}
	if _, err := s.river.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueue deliveries: %w", err)
	}
	return nil
}
