package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/notify"
)

// Store writes and reads dots through pgx directly: binary array parameters keep a
// request of thousands of dots at one upsert statement without formatting them into
// SQL text.
type Store struct {
	Pool *pgxpool.Pool
	// Written is called with the number of rows after each commit (metrics).
	Written func(n int)
	// Log reports last-value notifications that could not be sent (nil: slog's default).
	Log *slog.Logger
	// Followers are told about every write of values (follow.go).
	Followers []Follower
}

// row is a dot resolved to its internal variable key.
type row struct {
	variable int64
	ts       int64
	value    float64
	context  []byte
}

// resolver maps a message's dots to rows inside the transaction that writes them: for
// a message written alone, which may create its device and variables (or meet a
// disabled device), or whose batch failed. A message resolved beforehand (caches)
// carries a resolver that returns its rows.
type resolver func(ctx context.Context, tx pgx.Tx) ([]row, targets, error)

// deviceResolver creates the device with that label and the variables its dots name
// (name = label) when missing.
func deviceResolver(account int64, device string, dots []Dot) resolver {
	return func(ctx context.Context, tx pgx.Tx) ([]row, targets, error) {
		dev, err := upsertDevice(ctx, tx, account, device)
		if err != nil {
			return nil, targets{}, err
		}
		ids, err := upsertVariables(ctx, tx, account, dev, variableLabels(dots))
		if err != nil {
			return nil, targets{}, err
		}
		return deviceRows(dots, ids), newTargets(ref{dev, device}, ids), nil
	}
}

// idResolver maps dots whose Target is a variable public id (missing answers ids the
// account does not hold).
func idResolver(account int64, dots []Dot, missing notFound) resolver {
	return func(ctx context.Context, tx pgx.Tx) ([]row, targets, error) {
		return resolveIDs(ctx, tx, account, dots, missing)
	}
}

// resolved is the resolver of rows resolved already.
func resolved(rows []row, t targets) resolver {
	return func(context.Context, pgx.Tx) ([]row, targets, error) { return rows, t, nil }
}

// variableLabels lists the distinct targets of dots, in order.
func variableLabels(dots []Dot) []string {
	labels := make([]string, 0, 4)
	for _, d := range dots {
		if !slices.Contains(labels, d.Target) {
			labels = append(labels, d.Target)
		}
	}
	return labels
}

// deviceRows resolves dots targeting variable labels through label → key.
func deviceRows(dots []Dot, ids map[string]int64) []row {
	rows := make([]row, len(dots))
	for i, d := range dots {
		rows[i] = row{variable: ids[d.Target], ts: d.TS, value: d.Value, context: d.Context}
	}
	return rows
}

// variableNotFound answers a route naming one variable id the account lacks.
func variableNotFound(dots []Dot, _ []int) error {
	return fault.NotFound(fmt.Sprintf("Variable '%s' was not found.", dots[0].Target))
}

// itemsNotFound answers a collection naming ids the account lacks: 400001 per item.
func itemsNotFound(_ []Dot, missing []int) error {
	errs := fault.Fields{}
	for _, i := range missing {
		errs.Add(fmt.Sprintf("%d.variable", i), "Variable not found.")
	}
	return errs.Err()
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
		return 0, fault.DeviceDisabled
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

// retryable tells whether a transaction failed only because of concurrent writers:
// a deadlock, a serialization failure, or a target that changed under it.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, errStale) || (errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001"))
}

// notFound builds the error for dots whose variable id the account lacks (indexes).
type notFound func(dots []Dot, missing []int) error

// resolveIDs maps public variable ids to keys within the account. Ids the account does
// not hold are answered by missing; a disabled device is a 423.
func resolveIDs(ctx context.Context, db querier, account int64, dots []Dot, missing notFound) ([]row, targets, error) {
	seen := make(map[string]bool, len(dots))
	var ids []string
	for _, d := range dots {
		if !seen[d.Target] {
			seen[d.Target] = true
			ids = append(ids, d.Target)
		}
	}
	// By public id alone, the account checked here: with the account in the WHERE
	// clause, statistics not yet gathered for an account's new variables (a gateway
	// that creates them and posts at once) made the planner AND the account's whole
	// index with this one (15 ms instead of 0.4 for 100 ids).
	q, err := db.Query(ctx, `SELECT v.public_id, v.account_id, v.id, v.label, d.id, d.label, d.is_active
		FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE v.public_id = ANY($1)`, ids)
	if err != nil {
		return nil, targets{}, fmt.Errorf("resolve variables: %w", err)
	}
	keys := map[string]int64{}
	t := targets{variables: map[int64]string{}}
	disabled := false
	for q.Next() {
		var pub string
		var owner int64
		var v, dev ref
		var active bool
		if err := q.Scan(&pub, &owner, &v.id, &v.label, &dev.id, &dev.label, &active); err != nil {
			return nil, targets{}, fmt.Errorf("resolve variables: %w", err)
		}
		if owner != account { // another account's variable: not found, as if absent
			continue
		}
		keys[pub] = v.id
		t.variables[v.id] = v.label
		t.devices = append(t.devices, dev)
		disabled = disabled || !active
	}
	if err := q.Err(); err != nil {
		return nil, targets{}, fmt.Errorf("resolve variables: %w", err)
	}
	rows := make([]row, 0, len(dots))
	var absent []int
	for i, d := range dots {
		key, ok := keys[d.Target]
		if !ok {
			absent = append(absent, i)
			continue
		}
		rows = append(rows, row{variable: key, ts: d.TS, value: d.Value, context: d.Context})
	}
	switch {
	case len(absent) > 0:
		return nil, targets{}, missing(dots, absent)
	case disabled:
		return nil, targets{}, fault.DeviceDisabled
	}
	return rows, t, nil
}

// querier is a transaction or the pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// dedupe keeps the last dot of each (variable, timestamp), as the body reads, and sorts
// rows so concurrent writers take row locks in the same order.
func dedupe(rows []row) []row {
	slices.SortStableFunc(rows, func(a, b row) int {
		if a.variable != b.variable {
			return cmp.Compare(a.variable, b.variable)
		}
		return cmp.Compare(a.ts, b.ts)
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

// ref is a device or variable as resolved: its key and the label it was found by.
type ref struct {
	id    int64
	label string
}

// targets are what a write was resolved against. The write checks them while it
// holds their rows' locks: a device deleted, relabelled or disabled, or a variable
// deleted or relabelled, since it was resolved (in another transaction, or by a cache)
// fails the write with errStale instead of writing through a stale key.
type targets struct {
	devices   []ref
	variables map[int64]string // key → label
}

func newTargets(device ref, variables map[string]int64) targets {
	t := targets{devices: []ref{device}, variables: make(map[int64]string, len(variables))}
	for label, id := range variables {
		t.variables[id] = label
	}
	return t
}

// add merges u into t.
func (t *targets) add(u targets) {
	t.devices = append(t.devices, u.devices...)
	for id, label := range u.variables {
		t.variables[id] = label
	}
}

// errStale: a target changed between resolution and write; resolve again.
var errStale = errors.New("device or variable changed since it was resolved")

// writeRows upserts the values, moves lastValue/lastActivity of the variables and
// devices and updates the rollup tiers: one round trip. It returns the notification
// payloads of the variables whose lastValue moved, for notifyLastValues once the
// transaction has committed, and for the watched variables (sorted keys) their newest
// timestamp before this write (nil: none), read under their rows' lock (Change.Prev).
func writeRows(ctx context.Context, tx pgx.Tx, rows []row, t targets, watched []int64) ([]string, map[int64]*int64, error) {
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
	lv := lastPerVariable(rows, t.variables)
	devIDs, devLabels := sortedDevices(t.devices)
	// Lock order: devices (ascending id) before their variables, in every writer. A
	// writer that created variables already holds its device's row (the count
	// trigger); taking variable rows first elsewhere would deadlock with it.
	// The rollup tiers come after lastValueSQL, in a second round trip when any tile
	// ends by its variable's mark (rollupmark.go): the variables' rows are locked then
	// (see tiers.go), and lastValueSQL read their marks. A batch owns its queued
	// queries, so each gets new ones.
	var devicesSeen, varsSeen int64
	var moved []string
	var marks map[int64]int64
	var prev map[int64]*int64
	batch := func(valuesSQL string) []*pgx.QueuedQuery {
		varsSeen, moved = 0, moved[:0]
		b := &pgx.Batch{}
		if len(devIDs) > 1 {
			// an UPDATE … FROM locks rows in whatever order its join runs: take them
			// in key order first, or two batches sharing devices can deadlock
			b.Queue(lockDevicesSQL, devIDs)
		}
		b.Queue(valuesSQL, vars, ts, vals, ctxs)
		b.Queue(lastActivitySQL, devIDs, devLabels).Exec(func(ct pgconn.CommandTag) error {
			devicesSeen = ct.RowsAffected()
			return nil
		})
		if len(watched) > 0 {
			// the newest timestamp before this write, under the lock lastValueSQL takes
			// anyway (same mode, key order): the chain of the variable's writes
			b.Queue(prevValueSQL, watched).Query(func(rows pgx.Rows) error {
				prev = make(map[int64]*int64, len(watched))
				for rows.Next() {
					var id int64
					var ts *int64
					if err := rows.Scan(&id, &ts); err != nil {
						return err
					}
					prev[id] = ts
				}
				return rows.Err()
			})
		}
		b.Queue(lastValueSQL, lv.vars, lv.labels, lv.ts, lv.vals, lv.ctxs).Query(func(rows pgx.Rows) error {
			var err error
			moved, marks, err = movedPayloads(rows)
			varsSeen = int64(len(marks))
			return err
		})
		return b.QueuedQueries
	}

	// Fast path: a plain INSERT, about twice as fast as ON CONFLICT on a hypertable
	// (measured: 500k rows 6.0 s vs 13.6 s). Rows that exist already (a retried request)
	// make it fail with a unique violation: then the savepoint undoes it and the upsert
	// runs instead, and the tiles it touched are recomputed rather than added to.
	// Either way the same rows end up stored.
	tiles := addQueries
	err := sendBatch(ctx, tx, append([]*pgx.QueuedQuery{{SQL: "SAVEPOINT fast_insert"}}, batch(insertValuesSQL)...))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT fast_insert"); rerr != nil {
			return nil, nil, fmt.Errorf("write values: %w", rerr)
		}
		tiles = recomputeQueries
		err = sendBatch(ctx, tx, batch(upsertValuesSQL))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("write values: %w", err)
	}
	if devicesSeen != int64(len(devIDs)) || varsSeen != int64(len(lv.vars)) {
		return nil, nil, errStale
	}
	if qs := tiles(rows, marks); len(qs) > 0 {
		if err := sendBatch(ctx, tx, qs); err != nil {
			return nil, nil, fmt.Errorf("write rollup tiles: %w", err)
		}
	}
	return moved, prev, nil
}

// prevValueSQL locks the variables' rows (as lastValueSQL does, in key order) and
// reads their newest timestamps before the write.
const prevValueSQL = `SELECT id, (extract(epoch FROM last_value_ts) * 1000)::bigint FROM variables
WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`

// sortedDevices returns the distinct devices by ascending key (the lock order).
func sortedDevices(devices []ref) ([]int64, []string) {
	slices.SortFunc(devices, func(a, b ref) int { return cmp.Compare(a.id, b.id) })
	devices = slices.CompactFunc(devices, func(a, b ref) bool { return a.id == b.id })
	ids, labels := make([]int64, len(devices)), make([]string, len(devices))
	for i, d := range devices {
		ids[i], labels[i] = d.id, d.label
	}
	return ids, labels
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
//
// Both updates match only targets that still carry the label they were resolved by
// (and, for devices, are still active): the caller compares the rows they touched with
// the targets it sent (errStale).
//
// Each row returns its variable's rollup mark (rollupmark.go: which tiles the write
// keeps) and the last-value notification of its variable when this write moved its
// lastValue (the new last_value_ts is this batch's newest timestamp for it), NULL
// otherwise: the payload of API.md §12's deliveries (pkg/mqtt reads it).
const lastValueSQL = `UPDATE variables v SET
    last_activity      = now(),
    last_value         = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN u.value ELSE v.last_value END,
    last_value_context = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN u.context ELSE v.last_value_context END,
    last_value_created = CASE WHEN v.last_value_ts IS NULL OR u.ts >= v.last_value_ts THEN now() ELSE v.last_value_created END,
    last_value_ts      = GREATEST(v.last_value_ts, u.ts)
FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::float8[], $5::jsonb[]) AS u(id, label, ts, value, context),
    devices d
WHERE v.id = u.id AND v.label = u.label AND d.id = v.device_id
RETURNING v.id, v.account_id, (extract(epoch FROM v.rollups_until) * 1000)::bigint, CASE WHEN v.last_value_ts = u.ts THEN
    jsonb_build_object('a', v.account_id, 'd', d.label, 'v', v.label, 'value', v.last_value,
        'ts', (extract(epoch FROM v.last_value_ts) * 1000)::bigint,
        'c', coalesce(v.last_value_context, '{}'::jsonb))::text END`

// maxNotifyPayload keeps a notification under PostgreSQL's 8000-byte limit; a larger
// one (a large context) names the variable, and the listeners read the value back.
const maxNotifyPayload = 7900

// movedPayloads reads lastValueSQL's rows: the payloads of the variables whose
// lastValue moved, and the rollup mark (ms) of each variable the update matched.
func movedPayloads(rows pgx.Rows) ([]string, map[int64]int64, error) {
	var out []string
	marks := map[int64]int64{}
	for rows.Next() {
		var id, account, mark int64
		var payload *string
		if err := rows.Scan(&id, &account, &mark, &payload); err != nil {
			return nil, nil, fmt.Errorf("read moved last values: %w", err)
		}
		marks[id] = mark
		switch {
		case payload == nil:
		case len(*payload) > maxNotifyPayload:
			out = append(out, fmt.Sprintf(`{"a":%d,"id":%d,"reread":true}`, account, id))
		default:
			out = append(out, *payload)
		}
	}
	return out, marks, rows.Err()
}

// notifyLastValuesSQL sends the payloads in a transaction of its own, after the write
// committed. Why not a trigger in the writing transaction: PostgreSQL holds its
// notification queue lock from a notifying transaction's pre-commit through its WAL
// flush, so every writer that notifies waits for the others' flushes in line. Here
// only this short transaction notifies, and it commits without waiting for its flush
// (it changed nothing that must survive a crash: the values committed before it).
var notifyLastValuesSQL = []*pgx.QueuedQuery{
	{SQL: "BEGIN"},
	{SQL: "SET LOCAL synchronous_commit = off"},
	{SQL: `SELECT pg_notify('` + notify.LastValueChannel + `', p) FROM unnest($1::text[]) AS p`},
	{SQL: "COMMIT"},
}

// notifyLastValues tells every instance's listeners about lastValues that moved. A
// failure is logged, not returned: the values are committed and acknowledged either
// way; subscribers get the current value again when they resubscribe.
func (s *Store) notifyLastValues(ctx context.Context, payloads []string) {
	if len(payloads) == 0 {
		return
	}
	stmts := make([]*pgx.QueuedQuery, len(notifyLastValuesSQL))
	for i, q := range notifyLastValuesSQL {
		stmts[i] = &pgx.QueuedQuery{SQL: q.SQL}
	}
	stmts[2].Arguments = []any{payloads}
	b := &pgx.Batch{QueuedQueries: stmts}
	if err := s.Pool.SendBatch(ctx, b).Close(); err != nil {
		log := s.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn("last-value notifications not sent", "variables", len(payloads), "error", err.Error())
	}
}

const lockDevicesSQL = `SELECT FROM devices WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`

const lastActivitySQL = `UPDATE devices d SET last_activity = now()
FROM unnest($1::bigint[], $2::text[]) AS u(id, label)
WHERE d.id = u.id AND d.label = u.label AND d.is_active`

type lastValues struct {
	vars   []int64
	labels []string
	ts     []time.Time
	vals   []float64
	ctxs   []*string
}

// lastPerVariable picks each variable's newest row; rows are sorted by (variable, ts).
func lastPerVariable(rows []row, labels map[int64]string) lastValues {
	var lv lastValues
	for i, r := range rows {
		if i+1 < len(rows) && rows[i+1].variable == r.variable {
			continue
		}
		lv.vars = append(lv.vars, r.variable)
		lv.labels = append(lv.labels, labels[r.variable])
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
