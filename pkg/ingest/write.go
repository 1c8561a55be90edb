package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/apierr"
)

// Store writes and reads dots through pgx directly: binary array parameters keep a
// request of thousands of dots at one upsert statement without formatting them into
// SQL text.
type Store struct {
	Pool *pgxpool.Pool
	// Written is called with the number of rows after each commit (metrics).
	Written func(n int)
}

// row is a dot resolved to its internal variable key.
type row struct {
	variable int64
	ts       int64
	value    float64
	context  []byte
}

// ToDevice writes dots whose Target is a variable label to the device with the given
// label, creating the device and missing variables (name = label).
func (s *Store) ToDevice(ctx context.Context, account int64, device string, dots []Dot) error {
	return s.inTx(ctx, func(tx pgx.Tx) ([]row, []int64, error) {
		dev, err := upsertDevice(ctx, tx, account, device)
		if err != nil {
			return nil, nil, err
		}
		labels := make([]string, 0, 4)
		for _, d := range dots {
			if !slices.Contains(labels, d.Target) {
				labels = append(labels, d.Target)
			}
		}
		ids, err := upsertVariables(ctx, tx, account, dev, labels)
		if err != nil {
			return nil, nil, err
		}
		rows := make([]row, len(dots))
		for i, d := range dots {
			rows[i] = row{variable: ids[d.Target], ts: d.TS, value: d.Value, context: d.Context}
		}
		return rows, []int64{dev}, nil
	})
}

// ToVariableID writes dots to the variable with that public id (404 if the account
// has none).
func (s *Store) ToVariableID(ctx context.Context, account int64, id string, dots []Dot) error {
	for i := range dots {
		dots[i].Target = id
	}
	return s.inTx(ctx, func(tx pgx.Tx) ([]row, []int64, error) {
		rows, devices, missing, err := resolveIDs(ctx, tx, account, dots)
		if err != nil {
			return nil, nil, err
		}
		if len(missing) > 0 {
			return nil, nil, apierr.NotFound(fmt.Sprintf("Variable '%s' was not found.", id))
		}
		return rows, devices, nil
	})
}

// ToCollection writes dots whose Target is a variable public id; an id the account does
// not hold is a 400001 naming the item, and nothing is written.
func (s *Store) ToCollection(ctx context.Context, account int64, dots []Dot) error {
	return s.inTx(ctx, func(tx pgx.Tx) ([]row, []int64, error) {
		rows, devices, missing, err := resolveIDs(ctx, tx, account, dots)
		if err != nil {
			return nil, nil, err
		}
		if len(missing) > 0 {
			errs := apierr.Fields{}
			for _, i := range missing {
				errs.Add(fmt.Sprintf("%d.variable", i), "Variable not found.")
			}
			return nil, nil, errs.Err()
		}
		return rows, devices, nil
	})
}

// inTx runs resolve and then writes its rows in one transaction, retried on a deadlock
// or serialization failure (concurrent writers to overlapping variables).
func (s *Store) inTx(ctx context.Context, resolve func(pgx.Tx) ([]row, []int64, error)) error {
	var n int
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			rows, devices, err := resolve(tx)
			if err != nil {
				return err
			}
			rows = dedupe(rows)
			n = len(rows)
			return writeRows(ctx, tx, rows, devices)
		})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "40P01" && pe.Code != "40001") {
			break
		}
	}
	if err != nil {
		return err
	}
	if s.Written != nil {
		s.Written(n)
	}
	return nil
}

// upsertDevice finds the device by label, creating it when missing. It reads before it
// inserts so that writers to an existing device take no lock on its row here: the row
// is locked only by the lastActivity update at the end of the transaction.
func upsertDevice(ctx context.Context, tx pgx.Tx, account int64, label string) (int64, error) {
	var id int64
	var active bool
	err := tx.QueryRow(ctx, `WITH found AS (
		SELECT id, is_active FROM devices WHERE account_id = $1 AND label = $2
	), created AS (
		INSERT INTO devices (account_id, label, name) SELECT $1, $2, $2
		WHERE NOT EXISTS (SELECT 1 FROM found)
		ON CONFLICT (account_id, label) DO NOTHING
		RETURNING id, is_active
	)
	SELECT id, is_active FROM found UNION ALL SELECT id, is_active FROM created`, account, label).Scan(&id, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		// a concurrent request created it after this statement's snapshot: read it now
		err = tx.QueryRow(ctx, `SELECT id, is_active FROM devices WHERE account_id = $1 AND label = $2`,
			account, label).Scan(&id, &active)
	}
	if err != nil {
		return 0, fmt.Errorf("upsert device: %w", err)
	}
	if !active {
		return 0, apierr.DeviceDisabled
	}
	return id, nil
}

// upsertVariables creates missing variables and returns label → key, in one round trip.
func upsertVariables(ctx context.Context, tx pgx.Tx, account, device int64, labels []string) (map[string]int64, error) {
	b := &pgx.Batch{}
	// only missing labels are inserted: existing ones cost no speculative insertion
	b.Queue(`INSERT INTO variables (account_id, device_id, label, name)
		SELECT $1, $2, l, l FROM unnest($3::text[]) AS l
		WHERE NOT EXISTS (SELECT 1 FROM variables v WHERE v.device_id = $2 AND v.label = l)
		ORDER BY l
		ON CONFLICT (device_id, label) DO NOTHING`, account, device, labels)
	b.Queue(`SELECT id, label FROM variables WHERE device_id = $1 AND label = ANY($2)`, device, labels)
	res := tx.SendBatch(ctx, b)
	defer func() { _ = res.Close() }()
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("create variables: %w", err)
	}
	rows, err := res.Query()
	if err != nil {
		return nil, fmt.Errorf("read variables: %w", err)
	}
	ids := make(map[string]int64, len(labels))
	for rows.Next() {
		var id int64
		var label string
		if err := rows.Scan(&id, &label); err != nil {
			return nil, fmt.Errorf("read variables: %w", err)
		}
		ids[label] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read variables: %w", err)
	}
	if len(ids) != len(labels) {
		return nil, fmt.Errorf("create variables: %d of %d resolved", len(ids), len(labels))
	}
	return ids, nil
}

// resolveIDs maps public variable ids to keys within the account; it returns the
// indexes of dots whose id is not the account's. A disabled device is a 423.
func resolveIDs(ctx context.Context, tx pgx.Tx, account int64, dots []Dot) ([]row, []int64, []int, error) {
	var ids []string
	for _, d := range dots {
		if !slices.Contains(ids, d.Target) {
			ids = append(ids, d.Target)
		}
	}
	q, err := tx.Query(ctx, `SELECT v.public_id, v.id, v.device_id, d.is_active
		FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE v.account_id = $1 AND v.public_id = ANY($2)`, account, ids)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("resolve variables: %w", err)
	}
	keys := map[string]int64{}
	var devices []int64
	disabled := false
	for q.Next() {
		var pub string
		var key, dev int64
		var active bool
		if err := q.Scan(&pub, &key, &dev, &active); err != nil {
			return nil, nil, nil, fmt.Errorf("resolve variables: %w", err)
		}
		keys[pub] = key
		devices = append(devices, dev)
		disabled = disabled || !active
	}
	if err := q.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("resolve variables: %w", err)
	}
	rows := make([]row, 0, len(dots))
	var missing []int
	for i, d := range dots {
		key, ok := keys[d.Target]
		if !ok {
			missing = append(missing, i)
			continue
		}
		rows = append(rows, row{variable: key, ts: d.TS, value: d.Value, context: d.Context})
	}
	if disabled && len(missing) == 0 {
		return nil, nil, nil, apierr.DeviceDisabled
	}
	return rows, devices, missing, nil
}

// dedupe keeps the last dot of each (variable, timestamp), as the body reads, and sorts
// rows so concurrent writers take row locks in the same order.
func dedupe(rows []row) []row {
	slices.SortStableFunc(rows, func(a, b row) int {
		if a.variable != b.variable {
			return cmpInt(a.variable, b.variable)
		}
		return cmpInt(a.ts, b.ts)
	})
	out := rows[:0]
	for i, r := range rows {
		if i+1 < len(rows) && rows[i+1].variable == r.variable && rows[i+1].ts == r.ts {
			continue // a later dot with the same key follows
		}
		out = append(out, r)
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeRows upserts the values, moves lastValue/lastActivity of the variables and
// devices and updates the minute rollups: four statements sent in one round trip.
func writeRows(ctx context.Context, tx pgx.Tx, rows []row, devices []int64) error {
	n := len(rows)
	vars, ts, vals := make([]int64, n), make([]time.Time, n), make([]float64, n)
	ctxs := make([]*string, n)
	for i, r := range rows {
		vars[i], ts[i], vals[i] = r.variable, time.UnixMilli(r.ts).UTC(), r.value
		if r.context != nil {
			s := string(r.context)
			ctxs[i] = &s
		}
	}
	lv := lastPerVariable(rows)
	slices.Sort(devices)
	devices = slices.Compact(devices)
	// Lock order: devices (ascending id) before their variables, in every writer. A
	// writer that created variables already holds its device's row (the count
	// trigger); taking variable rows first elsewhere would deadlock with it.
	// The minute rollups come after lastValueSQL: the variables' rows are locked then
	// (see minutes.go). A batch owns its queued queries, so each gets new ones.
	sums := sumMinutes(rows)
	batch := func(valuesSQL, minutesSQL string, minutesArgs ...any) []*pgx.QueuedQuery {
		return []*pgx.QueuedQuery{
			{SQL: valuesSQL, Arguments: []any{vars, ts, vals, ctxs}},
			{SQL: `UPDATE devices SET last_activity = now() WHERE id = ANY($1)`, Arguments: []any{devices}},
			{SQL: lastValueSQL, Arguments: []any{lv.vars, lv.ts, lv.vals, lv.ctxs}},
			{SQL: minutesSQL, Arguments: minutesArgs},
		}
	}

	// Fast path: a plain INSERT, about twice as fast as ON CONFLICT on a hypertable
	// (measured: 500k rows 6.0 s vs 13.6 s). Rows that exist already (a retried request)
	// make it fail with a unique violation: then the savepoint undoes it and the upsert
	// runs instead, and the minutes it touched are recomputed rather than added to.
	// Either way the same rows end up stored.
	err := sendBatch(ctx, tx, append([]*pgx.QueuedQuery{{SQL: "SAVEPOINT fast_insert"}},
		batch(insertValuesSQL, addMinutesSQL, sums.vars, sums.minutes, sums.n, sums.sum, sums.min, sums.max)...))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT fast_insert"); rerr != nil {
			return fmt.Errorf("write values: %w", rerr)
		}
		err = sendBatch(ctx, tx, batch(upsertValuesSQL, recomputeMinutesSQL, sums.vars, sums.minutes))
	}
	if err != nil {
		return fmt.Errorf("write values: %w", err)
	}
	return nil
}

// sendBatch sends the statements in one round trip.
func sendBatch(ctx context.Context, tx pgx.Tx, stmts []*pgx.QueuedQuery) error {
	b := &pgx.Batch{QueuedQueries: stmts}
	return tx.SendBatch(ctx, b).Close()
}

const insertValuesSQL = `INSERT INTO "values" (variable_id, ts, value, context)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[], $4::jsonb[])`

// upsertValuesSQL: last write wins per (variable, ts); the unique index is the arbiter.
const upsertValuesSQL = `INSERT INTO "values" (variable_id, ts, value, context)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[], $4::jsonb[])
ON CONFLICT (variable_id, ts) DO UPDATE
SET value = EXCLUDED.value, context = EXCLUDED.context, created_at = now()`

// lastValueSQL moves lastValue only forward in time (an older dot written late leaves
// it), while lastActivity always records the write.
const lastValueSQL = `UPDATE variables v SET
    last_activity      = now(),
    last_value         = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN u.value ELSE v.last_value END,
    last_value_context = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN u.context ELSE v.last_value_context END,
    last_value_created = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN now() ELSE v.last_value_created END,
    last_value_ts      = GREATEST(v.last_value_ts, u.ts)
FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[], $4::jsonb[]) AS u(id, ts, value, context)
WHERE v.id = u.id`

type lastValues struct {
	vars []int64
	ts   []time.Time
	vals []float64
	ctxs []*string
}

// lastPerVariable picks each variable's newest row; rows are sorted by (variable, ts).
func lastPerVariable(rows []row) lastValues {
	var lv lastValues
	for i, r := range rows {
		if i+1 < len(rows) && rows[i+1].variable == r.variable {
			continue
		}
		lv.vars = append(lv.vars, r.variable)
		lv.ts = append(lv.ts, time.UnixMilli(r.ts).UTC())
		lv.vals = append(lv.vals, r.value)
		var c *string
		if r.context != nil {
			s := string(r.context)
			c = &s
		}
		lv.ctxs = append(lv.ctxs, c)
	}
	return lv
}
