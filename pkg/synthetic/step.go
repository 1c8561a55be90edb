package synthetic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/notify"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// A step of the upkeep (Upkeep.Step) recomputes the due to-do of many synthetic
// variables in one transaction, in a handful of round trips whatever their number:
//
//  1. take: one DELETE ... RETURNING of the oldest due to-do rows (FOR UPDATE SKIP
//     LOCKED), of any variables: the rows go only if the step commits;
//  2. one batch: lock the variables' rows in key order, then read their definitions
//     (a new snapshot, after any wait for a lock; parsed expressions are cached);
//  3. one batch of the window functions' first-value probes, when some variable has
//     windows (a moved first value recomputes that variable's whole history);
//  4. one batch of the writes: the packed days of the ranges cleared (set-based), then
//     per variable one statement that upserts its computed values over its ranges
//     (read as one span when they lie near each other) and deletes those no longer
//     computed, writing only values that differ and answering their timestamps;
//  5. one batch over what changed only: the tiles holding it (every tier, set-based),
//     the last values (one UPDATE), the dependents (chains) looked up and marked;
//  6. commit; one NOTIFY statement for the moved last values.
//
// A step that fails is done again variable by variable, so that one variable that
// cannot be computed (an overflow) holds back only its own to-do, which is postponed.
const (
	// maxStepRows is how many to-do rows one step takes.
	maxStepRows = 20000
	// maxExact is how many separate ranges of one variable a step recomputes as such;
	// more become the one range spanning them.
	maxExact = 256
	// spanGap: ranges of one variable closer than this are read by one statement over
	// the span between them (the values in the gaps are read, not written).
	spanGap = int64(time.Hour / time.Millisecond)
)

const takeSQL = `DELETE FROM synthetic_dirty WHERE id IN (
	SELECT id FROM synthetic_dirty WHERE not_before <= now() ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, variable_id, from_ts, to_ts, created_at`

// takeOnlySQL takes the listed rows still there (a step done again variable by variable).
const takeOnlySQL = `DELETE FROM synthetic_dirty WHERE id IN (
	SELECT id FROM synthetic_dirty WHERE id = ANY($1) FOR UPDATE SKIP LOCKED)
RETURNING id, variable_id, from_ts, to_ts, created_at`

const lockSQL = `SELECT FROM variables WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`

const loadSQL = `SELECT s.variable_id, s.account_id, v.label, s.expression::text, s.inputs, s.positional, s.firsts
FROM synthetic_variables s JOIN variables v ON v.id = s.variable_id WHERE s.variable_id = ANY($1)`

// packedInsideSQL lists the packed days that lie inside the (variable, [lo, hi])
// ranges: ClearPackedRanges deletes them.
const packedInsideSQL = `SELECT p.variable_id, p.day FROM values_packed p
JOIN unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
  ON p.variable_id = w.variable_id AND p.day >= w.lo AND p.day + INTERVAL '1 day' - INTERVAL '1 microsecond' <= w.hi`

const minutesPerDay = 24 * 60

// maxTilePoints: a variable whose changes reach more tiles than this is retiled over
// its ranges (two statements per tier) rather than tile by tile.
const maxTilePoints = 20000

// lastValuesSQL recomputes the lastValue of the variables $1 from their values (rows
// and packed days): a row per variable, with its last-value notification (ingest's
// payload) when it moved, else NULL.
const lastValuesSQL = `UPDATE variables v
SET (last_value, last_value_ts, last_value_context, last_value_created) =
    (SELECT value, ts, context, created_at FROM (
        (SELECT value, ts, context, created_at FROM "values" WHERE variable_id = v.id ORDER BY ts DESC LIMIT 1)
        UNION ALL
        (SELECT value, ts, context, created_at FROM packed_rows(ARRAY[v.id], packed_newest_day(v.id, 1, 'infinity'), 'infinity')
         ORDER BY ts DESC LIMIT 1)
    ) newest ORDER BY ts DESC LIMIT 1),
    last_activity = now()
FROM devices d, variables o
WHERE v.id = ANY($1) AND o.id = v.id AND d.id = v.device_id
RETURNING CASE WHEN v.last_value_ts IS NOT NULL AND (v.last_value_ts IS DISTINCT FROM o.last_value_ts OR v.last_value IS DISTINCT FROM o.last_value) THEN
    jsonb_build_object('a', v.account_id, 'd', d.label, 'v', v.label, 'value', v.last_value,
        'ts', (extract(epoch FROM v.last_value_ts) * 1000)::bigint, 'c', '{}'::jsonb)::text END`

// dependentsSQL: the synthetic variables reading any of $1.
const dependentsSQL = `SELECT variable_id, expression::text, inputs FROM synthetic_variables WHERE inputs && $1::bigint[]`

// job is one variable's part of a step.
type job struct {
	key    int64
	ids    []int64
	ranges [][2]int64 // as taken, then merged
	oldest time.Time
	d      *Definition // nil: the variable is gone or no longer synthetic
	firsts []int64     // the windows' first values now, when they moved

	changed []int64    // timestamps of the values written or deleted
	packed  []int64    // packed days (their start) deleted inside the ranges
	changes [][2]int64 // both as ranges, merged
}

// changeRanges are the timestamps where j's values changed, as merged ranges.
func (j *job) changeRanges() [][2]int64 {
	rs := make([][2]int64, 0, len(j.changed)+len(j.packed))
	for _, ts := range j.changed {
		rs = append(rs, [2]int64{ts, ts})
	}
	for _, day := range j.packed {
		rs = append(rs, [2]int64{day, day + int64(minutesPerDay)*60_000 - 1})
	}
	if len(rs) == 0 {
		return nil
	}
	return mergeN(rs, maxExact)
}

// stepResult is what a committed step did.
type stepResult struct {
	jobs     []*job
	payloads []string // last-value notifications to send
}

// Step recomputes the due to-do of as many synthetic variables as maxStepRows rows
// reach, in one transaction (did: something was taken). When that fails, each
// variable is done again alone: the others commit, the failing one's to-do is
// postponed with backoff.
func (u *Upkeep) Step(ctx context.Context) (did bool, err error) { return u.stepSplit(ctx, nil) }

// stepSplit is Step over the listed to-do rows only (due or not), when only is not nil.
func (u *Upkeep) stepSplit(ctx context.Context, only []int64) (did bool, err error) {
	res, err := u.step(ctx, only)
	if res != nil && len(res.jobs) > 0 && err == nil {
		u.committed(ctx, res)
		return true, nil
	}
	if err == nil {
		return false, nil
	}
	if res == nil || len(res.jobs) == 0 { // nothing taken
		return false, err
	}
	if len(res.jobs) == 1 {
		u.failed(ctx, res.jobs[0], err)
		return true, err
	}
	// one of them failed, the batch with it: each alone
	var errs []error
	for _, j := range res.jobs {
		one, err := u.step(ctx, j.ids)
		switch {
		case err != nil && one != nil && len(one.jobs) > 0:
			u.failed(ctx, one.jobs[0], err)
			errs = append(errs, err)
		case err != nil:
			errs = append(errs, err)
		default:
			u.committed(ctx, one)
		}
	}
	return true, errors.Join(errs...)
}

// committed counts, observes the lag and sends the notifications of a committed step.
func (u *Upkeep) committed(ctx context.Context, res *stepResult) {
	oldest := time.Time{}
	for _, j := range res.jobs {
		if oldest.IsZero() || j.oldest.Before(oldest) {
			oldest = j.oldest
		}
	}
	u.recomputed.WithLabelValues("ok").Add(float64(len(res.jobs)))
	u.lag.Observe(time.Since(oldest).Seconds())
	if len(res.payloads) == 0 {
		return
	}
	// pg_notify outside the transaction: NOTIFY takes a database-wide lock at commit
	if _, err := u.Pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, notify.LastValueChannel, res.payloads); err != nil {
		u.Log.Warn("synthetic variables: last-value notifications not sent", "count", len(res.payloads), "error", err.Error())
	}
}

// failed counts a variable's failed recompute and postpones its to-do rows (Run logs
// the error).
func (u *Upkeep) failed(ctx context.Context, j *job, err error) {
	u.recomputed.WithLabelValues("failed").Inc()
	u.postpone(ctx, j.ids)
}

// step takes due to-do rows (only those listed, when only is not nil) and recomputes
// their variables in one transaction. res lists what was taken, also when err is set.
func (u *Upkeep) step(ctx context.Context, only []int64) (res *stepResult, err error) {
	res = &stepResult{}
	err = pgx.BeginFunc(ctx, u.Pool, func(tx pgx.Tx) error {
		res.jobs, res.payloads = nil, nil
		var rows pgx.Rows
		var err error
		if only == nil {
			rows, err = tx.Query(ctx, takeSQL, maxStepRows)
		} else {
			rows, err = tx.Query(ctx, takeOnlySQL, only)
		}
		if err != nil {
			return fmt.Errorf("take to-do: %w", err)
		}
		byKey := map[int64]*job{}
		for rows.Next() {
			var id, key, from, to int64
			var at time.Time
			if err := rows.Scan(&id, &key, &from, &to, &at); err != nil {
				rows.Close()
				return fmt.Errorf("take to-do: %w", err)
			}
			j := byKey[key]
			if j == nil {
				j = &job{key: key, oldest: at}
				byKey[key] = j
				res.jobs = append(res.jobs, j)
			}
			j.ids, j.ranges = append(j.ids, id), append(j.ranges, [2]int64{from, to})
			if at.Before(j.oldest) {
				j.oldest = at
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("take to-do: %w", err)
		}
		if len(res.jobs) == 0 {
			return nil
		}
		slices.SortFunc(res.jobs, func(a, b *job) int { return cmp.Compare(a.key, b.key) })
		var err2 error
		res.payloads, err2 = u.recompute(ctx, tx, res.jobs)
		return err2
	})
	if err != nil && len(res.jobs) == 1 {
		err = fmt.Errorf("synthetic variable %d: %w", res.jobs[0].key, err)
	}
	return res, err
}

// recompute brings the jobs' variables up to date in tx (see the top of this file).
func (u *Upkeep) recompute(ctx context.Context, tx pgx.Tx, jobs []*job) (payloads []string, err error) {
	keys := make([]int64, len(jobs))
	byKey := make(map[int64]*job, len(jobs))
	for i, j := range jobs {
		keys[i], byKey[j.key] = j.key, j
	}
	// the variables' rows first, in key order: recomputes of one variable (and its
	// definition) run one after the other, each seeing what the previous committed;
	// then the definitions, read after any wait for a lock
	b := &pgx.Batch{}
	b.Queue(lockSQL, keys)
	b.Queue(loadSQL, keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d := &Definition{}
			var text string
			if err := rows.Scan(&d.Key, &d.Account, &d.Label, &text, &d.Inputs, &d.Positional, &d.Firsts); err != nil {
				return err
			}
			if d.Expr, err = u.expr(text); err != nil {
				return fmt.Errorf("synthetic variable %d: stored expression: %w", d.Key, err)
			}
			if j := byKey[d.Key]; j != nil {
				j.d = d
			}
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock and load: %w", err)
	}
	var live []*job
	for _, j := range jobs {
		if j.d != nil {
			live = append(live, j)
		}
	}
	if len(live) == 0 { // gone: their to-do just goes
		return nil, nil
	}
	// the windows' first values, all in one round trip
	b = &pgx.Batch{}
	for _, j := range live {
		if len(j.d.Expr.AnchoredWindows()) == 0 {
			continue
		}
		stmts, err := firstsStatements(j.d)
		if err != nil {
			return nil, fmt.Errorf("synthetic %d: %w", j.key, err)
		}
		now := make([]int64, len(stmts))
		for i, q := range stmts {
			b.Queue(q.SQL, q.Args...).QueryRow(func(row pgx.Row) error { return row.Scan(&now[i]) })
		}
		j.firsts = now
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("first values: %w", err)
		}
	}
	// the ranges: merged; the whole history when a window's grid moved
	var rk, rlo, rhi []int64
	b = &pgx.Batch{}
	queue := func(_ context.Context, sql string, args ...any) error {
		b.Queue(sql, args...)
		return nil
	}
	for _, j := range live {
		j.ranges = mergeN(j.ranges, maxExact)
		if j.firsts != nil && !slices.Equal(j.firsts, j.d.Firsts) {
			j.ranges = [][2]int64{{0, MaxTimestamp}}
			b.Queue(`UPDATE synthetic_variables SET firsts = $2 WHERE variable_id = $1`, j.key, j.firsts)
			j.d.Firsts = j.firsts
		}
		for _, r := range j.ranges {
			rk, rlo, rhi = append(rk, j.key), append(rlo, r[0]), append(rhi, r[1])
		}
	}
	// the ranges as rows only (the packed days inside them noted: their values change
	// without a row telling), then each variable's values upserted from the computation
	// and those it no longer has deleted: only values that differ are written, and
	// their timestamps come back
	b.Queue(packedInsideSQL, rk, millisToTimes(rlo), millisToTimes(rhi)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k int64
			var day time.Time
			if err := rows.Scan(&k, &day); err != nil {
				return err
			}
			if j := byKey[k]; j != nil {
				j.packed = append(j.packed, day.UnixMilli())
			}
		}
		return rows.Err()
	})
	if err := values.ClearPackedRanges(ctx, queue, rk, rlo, rhi); err != nil {
		return nil, err
	}
	for _, j := range live {
		for _, span := range spans(j.ranges) {
			q, err := replaceComputed(j.d, span)
			if err != nil {
				return nil, err
			}
			b.Queue(q.SQL, q.Args...).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var ts int64
					if err := rows.Scan(&ts); err != nil {
						return err
					}
					j.changed = append(j.changed, ts)
				}
				return rows.Err()
			})
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("recompute: %w", err)
	}
	// the tiles holding what changed, the last values, the dependents over what changed
	b = &pgx.Batch{}
	var tileVars, tileTS, bigK, bigLo, bigHi, liveKeys []int64
	for _, j := range live {
		j.changes = j.changeRanges()
		if len(j.changes) == 0 {
			continue
		}
		liveKeys = append(liveKeys, j.key)
		if n := len(j.changed) + len(j.packed)*minutesPerDay; n > maxTilePoints {
			for _, r := range j.ranges { // a large recompute: its ranges retiled whole
				bigK, bigLo, bigHi = append(bigK, j.key), append(bigLo, r[0]), append(bigHi, r[1])
			}
			continue
		}
		for _, ts := range j.changed {
			tileVars, tileTS = append(tileVars, j.key), append(tileTS, ts)
		}
		for _, day := range j.packed {
			for m := range minutesPerDay {
				tileVars, tileTS = append(tileVars, j.key), append(tileTS, day+int64(m)*60_000)
			}
		}
	}
	if len(liveKeys) == 0 { // nothing differed: nothing else to do
		return nil, nil
	}
	if err := values.RetileRanges(ctx, queue, bigK, bigLo, bigHi); err != nil {
		return nil, err
	}
	if err := values.RecomputeTilesAt(ctx, queue, tileVars, tileTS); err != nil {
		return nil, err
	}
	b.Queue(lastValuesSQL, liveKeys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var p *string
			if err := rows.Scan(&p); err != nil {
				return err
			}
			if p != nil {
				payloads = append(payloads, *p)
			}
		}
		return rows.Err()
	})
	// the variables reading them (chains): marked over what changed
	var vars, froms, tos []int64
	b.Queue(dependentsSQL, liveKeys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id int64
			var text string
			var inputs []int64
			if err := rows.Scan(&id, &text, &inputs); err != nil {
				return err
			}
			e, err := u.expr(text)
			if err != nil {
				return fmt.Errorf("synthetic variable %d: stored expression: %w", id, err)
			}
			for _, in := range inputs {
				j := byKey[in]
				if j == nil || in == id {
					continue
				}
				for _, r := range j.changes {
					lo, hi := e.Affected(r[0], r[1])
					vars, froms, tos = append(vars, id), append(froms, max(lo, 0)), append(tos, min(hi, MaxTimestamp))
				}
			}
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("retile: %w", err)
	}
	if err := addDirty(ctx, PgxTx(tx), vars, froms, tos, 0); err != nil {
		return nil, err
	}
	return payloads, nil
}

// spans groups a variable's merged ranges into those one statement computes: ranges
// closer than spanGap to the previous one join its span.
func spans(ranges [][2]int64) [][][2]int64 {
	var out [][][2]int64
	for _, r := range ranges {
		if n := len(out); n > 0 {
			last := out[n-1]
			if r[0]-last[len(last)-1][1] <= spanGap {
				out[n-1] = append(last, r)
				continue
			}
		}
		out = append(out, [][2]int64{r})
	}
	return out
}

// replaceComputed is the statement bringing d's values over span's ranges to the
// computation, reading the inputs over the span from its first range's start to its
// last's end: values computed and not stored or stored otherwise are upserted, values
// stored and no longer computed deleted; it answers the timestamps (ms) of both.
// Values that equal their computation are not written.
func replaceComputed(d *Definition, span [][2]int64) (querybuilder.Query, error) {
	from, to := span[0][0], span[len(span)-1][1]
	q, err := compileRange(d, from, to, true)
	if err != nil {
		return querybuilder.Query{}, err
	}
	lo, hi := time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	inside := func(col string) (string, []any) { // col in span's ranges
		if len(span) == 1 {
			return col + ` BETWEEN ? AND ?`, []any{lo, hi}
		}
		los, his := make([]time.Time, len(span)), make([]time.Time, len(span))
		for i, r := range span {
			los[i], his[i] = time.UnixMilli(r[0]).UTC(), time.UnixMilli(r[1]).UTC()
		}
		return col + ` BETWEEN ? AND ? AND EXISTS (SELECT FROM unnest(?::timestamptz[], ?::timestamptz[]) AS r(lo, hi) WHERE ` +
			col + ` BETWEEN r.lo AND r.hi)`, []any{lo, hi, los, his}
	}
	inC, argsC := inside("c.ts")
	inX, argsX := inside("x.ts")
	args := append(append(slices.Clone(q.Args), argsC...), d.Key)
	args = append(append(args, argsX...), d.Key)
	stmt, err := dollar(querybuilder.Query{SQL: `WITH c AS (
SELECT c.ts, c.value FROM (
` + q.SQL + `
) c WHERE ` + inC + `
), gone AS (
DELETE FROM "values" x WHERE x.variable_id = ?::bigint AND ` + inX + ` AND NOT EXISTS (SELECT FROM c WHERE c.ts = x.ts)
RETURNING x.ts
), put AS (
INSERT INTO "values" AS x (variable_id, ts, value) SELECT ?::bigint, c.ts, c.value FROM c
ON CONFLICT (variable_id, ts) DO UPDATE SET value = EXCLUDED.value, created_at = now()
WHERE x.value IS DISTINCT FROM EXCLUDED.value
RETURNING x.ts
)
SELECT round(date_part('epoch', ts) * 1000)::bigint FROM gone UNION ALL SELECT round(date_part('epoch', ts) * 1000)::bigint FROM put`, Args: args})
	if err != nil {
		return querybuilder.Query{}, err
	}
	return querybuilder.Query{SQL: stmt, Args: args}, nil
}

func millisToTimes(ms []int64) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = time.UnixMilli(m).UTC()
	}
	return out
}
