package values

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

// MaxTimestamp is the last timestamp a value may have (API.md §6): 9999-12-31T23:59:59.999Z.
const MaxTimestamp = 253402300799999

// Range is an inclusive time range in ms; nil bounds are open.
type Range struct{ Start, End *int64 }

// Bounds are the range's ends as times: the open ones at 1970 and MaxTimestamp.
func (r Range) Bounds() (time.Time, time.Time) {
	start, end := time.UnixMilli(0).UTC(), time.UnixMilli(MaxTimestamp).UTC()
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
	start, end := r.Bounds()
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
// rollup tiers from what remains, in one transaction; follow, when not nil, runs in it
// last (the pipeline's followers: what must commit with the delete).
func (s *Store) Delete(ctx context.Context, key int64, r Range, follow func(ctx context.Context, tx pgx.Tx) error) error {
	start, end := r.Bounds()
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// the variable's row first, as writers lock it before their rollups (tiers.go)
		if _, err := tx.Exec(ctx, `SELECT FROM variables WHERE id = $1 FOR NO KEY UPDATE`, key); err != nil {
			return fmt.Errorf("lock variable: %w", err)
		}
		if err := clearPacked(ctx, execIn(tx), key, start.UnixMilli(), end.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM "values" WHERE variable_id = $1 AND ts BETWEEN $2 AND $3`,
			key, start, end); err != nil {
			return fmt.Errorf("delete values: %w", err)
		}
		first, last := start.UnixMilli(), end.UnixMilli()
		if err := deleteTiles(ctx, execIn(tx), []int64{key}, Range{Start: &first, End: &last}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lastValueAfterDeleteSQL, key); err != nil {
			return fmt.Errorf("recompute last value: %w", err)
		}
		if follow == nil {
			return nil
		}
		return follow(ctx, tx)
	})
}

// Statistic computes one aggregate over the range (count and sum are 0, the others
// null, without data) from the rollup tiers and the raw values at the range's edges,
// as E7 does (querybuilder.VariableStatistic).
// Before the raw horizon (when known) the range is rounded outward to its minutes
// (API.md §16); tiles are read only before b.RollupsUntil.
func (s *Store) Statistic(ctx context.Context, key int64, agg string, r Range, b querybuilder.TierBounds) (*float64, error) {
	start, end := r.Bounds()
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

// afterSQL reads the values of each variable $2[i] newer than $3[i], oldest first, at
// most $4 each, from both layouts (docs/storage.md), answering them with the tag
// $1[i]. Packed values come up only when the reader lags the late-data window (an
// outage of every instance, for the event evaluation): then a batch reads up to the end
// of the first two packed days after $3[i] (d.upto), rows included, so that no older
// value is passed over.
const afterSQL = `SELECT e.tag, (extract(epoch FROM x.ts) * 1000)::bigint, x.value
FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS e(tag, variable_id, after)
CROSS JOIN LATERAL (
    SELECT coalesce(min(day) + INTERVAL '2 days', 'infinity') AS upto FROM values_packed
    WHERE variable_id = e.variable_id AND day >= time_bucket(INTERVAL '1 day', e.after)
) d
CROSS JOIN LATERAL (
    SELECT ts, value FROM (
        (SELECT ts, value FROM "values"
         WHERE variable_id = e.variable_id AND ts > e.after AND ts < d.upto ORDER BY ts LIMIT $4)
        UNION ALL
        SELECT ts, value FROM packed_dots(e.after, least(d.upto, 'infinity') - INTERVAL '1 microsecond')
        WHERE variable_id = e.variable_id AND ts > e.after
    ) both_layouts ORDER BY ts LIMIT $4
) x
ORDER BY e.tag, x.ts`

// After reads, for each i, up to limit values of variable keys[i] newer than after[i],
// oldest first, in tx, and calls each with tags[i] and the value (ms, number).
func After(ctx context.Context, tx pgx.Tx, tags, keys []int64, after []time.Time, limit int,
	each func(tag, ts int64, value float64)) error {
	rows, err := tx.Query(ctx, afterSQL, tags, keys, after, limit)
	if err != nil {
		return fmt.Errorf("read values after: %w", err)
	}
	var tag, ts int64
	var v float64
	if _, err := pgx.ForEachRow(rows, []any{&tag, &ts, &v}, func() error {
		each(tag, ts, v)
		return nil
	}); err != nil {
		return fmt.Errorf("read values after: %w", err)
	}
	return nil
}
