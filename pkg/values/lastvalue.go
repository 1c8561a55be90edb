package values

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/notify"
)

// A variable's last value (variables.last_value*) is its newest stored value. Writes
// move it forward in the writing transaction (lastValueSQL); writers that delete or
// replace values recompute it from what is stored (newestSQL). Either way, a move
// yields one notification payload (payloadSQL) that NotifyLastValues sends once the
// transaction committed.

// payloadSQL is the last-value notification of the variable v (of device d) as it is
// after the statement: the payload of API.md §12's deliveries (pkg/mqtt reads it).
const payloadSQL = `jsonb_build_object('a', v.account_id, 'd', d.label, 'v', v.label, 'value', v.last_value,
        'ts', (extract(epoch FROM v.last_value_ts) * 1000)::bigint,
        'c', coalesce(v.last_value_context, '{}'::jsonb))::text`

// maxNotifyPayload keeps a notification under PostgreSQL's 8000-byte limit; a larger
// one (a large context) names the variable, and the listeners read the value back.
const maxNotifyPayload = 7900

// payload is the notification to send for a variable whose payloadSQL is p ("" when
// p is nil: its last value did not move).
func payload(account, id int64, p *string) string {
	switch {
	case p == nil:
		return ""
	case len(*p) > maxNotifyPayload:
		return fmt.Sprintf(`{"a":%d,"id":%d,"reread":true}`, account, id)
	}
	return *p
}

// newestSQL is the newest stored value (value, ts, context, created_at) of the variable
// key (SQL text naming it), in either layout: the newest packed one is in its newest
// packed day.
func newestSQL(key string) string {
	return `SELECT value, ts, context, created_at FROM (
        (SELECT value, ts, context, created_at FROM "values" WHERE variable_id = ` + key + ` ORDER BY ts DESC LIMIT 1)
        UNION ALL
        (SELECT value, ts, context, created_at
         FROM packed_rows(ARRAY[` + key + `::bigint], packed_newest_day(` + key + `, 1, 'infinity'), 'infinity')
         ORDER BY ts DESC LIMIT 1)
    ) newest ORDER BY ts DESC LIMIT 1`
}

// lastValueAfterDeleteSQL sets a variable's lastValue to its newest remaining value.
var lastValueAfterDeleteSQL = `UPDATE variables
SET (last_value, last_value_ts, last_value_context, last_value_created) = (` + newestSQL("$1") + `)
WHERE id = $1`

// recomputeLastValuesSQL sets the lastValue of the variables $1 to their newest stored
// value after a replace, and records the write as their activity. Each row answers
// its variable's notification when its last value moved, else NULL.
var recomputeLastValuesSQL = `UPDATE variables v
SET (last_value, last_value_ts, last_value_context, last_value_created) = (` + newestSQL("v.id") + `),
    last_activity = now()
FROM devices d, variables o
WHERE v.id = ANY($1) AND o.id = v.id AND d.id = v.device_id
RETURNING v.id, v.account_id,
    CASE WHEN v.last_value_ts IS NOT NULL AND (v.last_value_ts IS DISTINCT FROM o.last_value_ts OR v.last_value IS DISTINCT FROM o.last_value)
    THEN ` + payloadSQL + ` END`

// RecomputeLastValues sets the variables' lastValue to their newest stored value, in
// the caller's transaction (which holds their rows' locks), and returns the
// notifications of those that moved, for NotifyLastValues once committed.
func RecomputeLastValues(ctx context.Context, tx Tx, keys []int64) ([]string, error) {
	var out []string
	err := tx.Query(ctx, func(scan func(...any) error) error {
		var id, account int64
		var p *string
		if err := scan(&id, &account, &p); err != nil {
			return err
		}
		if s := payload(account, id, p); s != "" {
			out = append(out, s)
		}
		return nil
	}, recomputeLastValuesSQL, keys)
	if err != nil {
		return nil, fmt.Errorf("recompute last values: %w", err)
	}
	return out, nil
}

// queueRecomputeLastValues is RecomputeLastValues queued in b: the notifications are
// appended to out when b is sent.
func queueRecomputeLastValues(b *pgx.Batch, keys []int64, out *[]string) {
	b.Queue(recomputeLastValuesSQL, keys).Query(func(rows pgx.Rows) error {
		var id, account int64
		var p *string
		_, err := pgx.ForEachRow(rows, []any{&id, &account, &p}, func() error {
			if s := payload(account, id, p); s != "" {
				*out = append(*out, s)
			}
			return nil
		})
		return err
	})
}

// movedPayloads reads lastValueSQL's rows: the payloads of the variables whose
// lastValue moved, and the rollup mark (ms) of each variable the update matched.
func movedPayloads(rows pgx.Rows) ([]string, map[int64]int64, error) {
	var out []string
	marks := map[int64]int64{}
	for rows.Next() {
		var id, account, mark int64
		var p *string
		if err := rows.Scan(&id, &account, &mark, &p); err != nil {
			return nil, nil, fmt.Errorf("read moved last values: %w", err)
		}
		marks[id] = mark
		if s := payload(account, id, p); s != "" {
			out = append(out, s)
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

// NotifyLastValues tells every instance's listeners about lastValues that moved. A
// failure is logged, not returned: the values are committed and acknowledged either
// way; subscribers get the current value again when they resubscribe.
func (s *Store) NotifyLastValues(ctx context.Context, payloads []string) {
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
