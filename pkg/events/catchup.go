package events

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
)

// behindSQL lists the active events whose stored state has not reached their
// variable's last value: each one's last evaluated timestamp (-1: none) and that last
// value's (Unix ms).
const behindSQL = `SELECT e.id, coalesce(s.last_ts, -1), (extract(epoch FROM v.last_value_ts) * 1000)::bigint
	FROM events e JOIN event_states s ON s.event_id = e.id JOIN variables v ON v.id = e.variable_id
	WHERE e.is_active AND v.last_value_ts IS NOT NULL
	AND (extract(epoch FROM v.last_value_ts) * 1000)::bigint > coalesce(s.last_ts, -1)`

// lag is where an event's evaluation stands and the value it is to reach (Unix ms).
type lag struct{ at, target int64 }

// CatchUp evaluates from the database, now, every active event whose stored state is
// behind its variable's last value, until each has reached the value that was last
// when CatchUp began (later ones are left to the running instances): for a process
// that exits once its writes are done (`sensorapi load`), after Run has returned.
// Transitions queue their deliveries as any evaluation does.
func (s *Service) CatchUp(ctx context.Context) error {
	lags, err := s.behind(ctx)
	if err != nil {
		return err
	}
	for len(lags) > 0 {
		ids := slices.Sorted(maps.Keys(lags))
		ids = ids[:min(len(ids), maxBatch)]
		_, results, err := s.evaluate(ctx, ids)
		if err != nil {
			return err
		}
		s.metrics.evaluations.WithLabelValues("database").Add(float64(len(ids)))
		advance(lags, ids, results)
	}
	return nil
}

// behind reads the events that CatchUp is to evaluate.
func (s *Service) behind(ctx context.Context) (map[int64]lag, error) {
	rows, err := s.pool.Query(ctx, behindSQL)
	if err != nil {
		return nil, fmt.Errorf("read events behind their values: %w", err)
	}
	out := map[int64]lag{}
	var id int64
	var l lag
	if _, err := pgx.ForEachRow(rows, []any{&id, &l.at, &l.target}, func() error {
		out[id] = l
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read events behind their values: %w", err)
	}
	return out, nil
}

// advance moves the evaluated events' lags to their new states and drops those done:
// at their target, inactive or deleted (no result), or not moved (their values are
// gone: nothing more to read).
func advance(lags map[int64]lag, ids []int64, results []evaluated) {
	at := map[int64]int64{}
	for _, r := range results {
		if r.st.LastTS != nil {
			at[r.ev.ID] = *r.st.LastTS
		}
	}
	for _, id := range ids {
		l := lags[id]
		now, ok := at[id]
		if !ok || now >= l.target || now <= l.at {
			delete(lags, id)
			continue
		}
		lags[id] = lag{at: now, target: l.target}
	}
}
