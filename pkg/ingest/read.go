package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/querybuilder"
)

// StoredDot is a value as read back.
type StoredDot struct {
	Value     float64         `json:"value"`
	Timestamp int64           `json:"timestamp"`
	Context   json.RawMessage `json:"context"`
	CreatedAt int64           `json:"created_at"`
}

// Variable identifies a variable of the account by public id, or by device and
// variable labels.
type Variable struct {
	ID                 string
	DeviceLabel, Label string
}

func (v Variable) String() string {
	if v.ID != "" {
		return v.ID
	}
	return v.DeviceLabel + "/" + v.Label
}

// Resolve returns the variable's internal key, or a 404.
func (s *Store) Resolve(ctx context.Context, account int64, v Variable) (int64, error) {
	var key int64
	var err error
	if v.ID != "" {
		err = s.Pool.QueryRow(ctx, `SELECT id FROM variables WHERE account_id = $1 AND public_id = $2`,
			account, v.ID).Scan(&key)
	} else {
		err = s.Pool.QueryRow(ctx, `SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
			WHERE d.account_id = $1 AND d.label = $2 AND v.label = $3`, account, v.DeviceLabel, v.Label).Scan(&key)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fault.NotFound(fmt.Sprintf("Variable '%s' was not found.", v))
	}
	if err != nil {
		return 0, fmt.Errorf("resolve variable: %w", err)
	}
	return key, nil
}

// Range is an inclusive time range in ms; nil bounds are open.
type Range struct{ Start, End *int64 }

func (r Range) bounds() (time.Time, time.Time) {
	start, end := time.UnixMilli(0).UTC(), time.UnixMilli(maxTimestamp).UTC()
	if r.Start != nil {
		start = time.UnixMilli(*r.Start).UTC()
	}
	if r.End != nil {
		end = time.UnixMilli(*r.End).UTC()
	}
	return start, end
}

// Page reads up to limit dots newest first after skipping offset, and tells whether
// more follow (one extra row is read instead of counting the series).
func (s *Store) Page(ctx context.Context, key int64, r Range, offset, limit int) ([]StoredDot, bool, error) {
	start, end := r.bounds()
	// a dot stored without context reads as {}, as lastValue shows it
	rows, err := s.Pool.Query(ctx, pageSQL, key, start, end, offset, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("read values: %w", err)
	}
	dots, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredDot, error) {
		var d StoredDot
		err := row.Scan(&d.Value, &d.Timestamp, &d.Context, &d.CreatedAt)
		return d, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read values: %w", err)
	}
	if len(dots) > limit {
		return dots[:limit], true, nil
	}
	return dots, false, nil
}

// pageSQL reads a page of dots of both layouts, newest first ($4 offset, $5 limit):
// the k = offset + limit newest are among the k newest rows and the k newest packed
// dots, and only the packed days holding those are unpacked (packed_newest_day).
const pageSQL = `SELECT value, (extract(epoch FROM ts) * 1000)::bigint, coalesce(context, '{}'), (extract(epoch FROM created_at) * 1000)::bigint
FROM (
    (SELECT ts, value, context, created_at FROM "values"
     WHERE variable_id = $1 AND ts BETWEEN $2 AND $3 ORDER BY ts DESC LIMIT $4::bigint + $5::bigint)
    UNION ALL
    SELECT ts, value, context, created_at
    FROM packed_rows(ARRAY[$1::bigint], greatest($2, packed_newest_day($1, $4::bigint + $5::bigint, $3)), $3)
) x
ORDER BY ts DESC OFFSET $4 LIMIT $5`

// Last returns the variable's newest dot, or nil.
func (s *Store) Last(ctx context.Context, key int64) (*StoredDot, error) {
	dots, _, err := s.Page(ctx, key, Range{}, 0, 1)
	if err != nil || len(dots) == 0 {
		return nil, err
	}
	return &dots[0], nil
}

// Delete removes the variable's values in the range and recomputes its lastValue and
// rollup tiers from what remains, in one transaction; the store's followers are told.
func (s *Store) Delete(ctx context.Context, key int64, r Range) error {
	start, end := r.bounds()
	changes := []Change{{Variable: key, From: start.UnixMilli(), To: end.UnixMilli(), Deleted: true}}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// the variable's row first, as writers lock it before their rollups (tiers.go)
		if _, err := tx.Exec(ctx, `SELECT FROM variables WHERE id = $1 FOR NO KEY UPDATE`, key); err != nil {
			return fmt.Errorf("lock variable: %w", err)
		}
		if err := ClearPacked(ctx, execIn(tx), key, start.UnixMilli(), end.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM "values" WHERE variable_id = $1 AND ts BETWEEN $2 AND $3`,
			key, start, end); err != nil {
			return fmt.Errorf("delete values: %w", err)
		}
		first, last := start.UnixMilli(), end.UnixMilli()
		if err := DeleteTiles(ctx, execIn(tx), []int64{key}, Range{Start: &first, End: &last}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, lastValueAfterDeleteSQL, key)
		if err != nil {
			return fmt.Errorf("recompute last value: %w", err)
		}
		return s.mark(ctx, tx, changes)
	})
	if err == nil {
		s.committed(changes)
	}
	return err
}

// lastValueAfterDeleteSQL sets a variable's lastValue to its newest remaining dot, in
// either layout (the newest packed one is in its newest packed day).
const lastValueAfterDeleteSQL = `UPDATE variables
SET (last_value, last_value_ts, last_value_context, last_value_created) = (
    SELECT value, ts, context, created_at FROM (
        (SELECT value, ts, context, created_at FROM "values" WHERE variable_id = $1 ORDER BY ts DESC LIMIT 1)
        UNION ALL
        (SELECT value, ts, context, created_at
         FROM packed_rows(ARRAY[$1::bigint], packed_newest_day($1, 1, 'infinity'), 'infinity')
         ORDER BY ts DESC LIMIT 1)
    ) x ORDER BY ts DESC LIMIT 1)
WHERE id = $1`

// Statistic computes one aggregate over the range (count and sum are 0, the others
// null, without data) from the rollup tiers and the raw values at the range's edges,
// as E7 does (querybuilder.VariableStatistic).
// Before the raw horizon (when known) the range is rounded outward to its minutes
// (API.md §16); tiles are read only before b.RollupsUntil.
func (s *Store) Statistic(ctx context.Context, key int64, agg string, r Range, b querybuilder.TierBounds) (*float64, error) {
	start, end := r.bounds()
	q, err := querybuilder.VariableStatistic(key, agg, start, end, b)
	if err != nil {
		return nil, err
	}
	v, err := s.statistic(ctx, q)
	if q.IEEE != nil && fault.IsOutOfRange(err) { // a sum past the largest double
		v, err = s.statistic(ctx, *q.IEEE)
	}
	if err != nil {
		return nil, fmt.Errorf("statistic %s: %w", agg, err)
	}
	return v, nil
}

func (s *Store) statistic(ctx context.Context, q querybuilder.Query) (*float64, error) {
	sql, err := sq.Dollar.ReplacePlaceholders(q.SQL)
	if err != nil {
		return nil, err
	}
	var v *float64
	return v, s.Pool.QueryRow(ctx, sql, q.Args...).Scan(&v)
}
