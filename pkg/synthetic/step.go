package synthetic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// A step of the upkeep (Upkeep.Step) recomputes the due to-do of many synthetic
// variables in one transaction, in a handful of round trips whatever their number:
//
//  1. take: one DELETE ... RETURNING of the oldest due to-do rows (FOR UPDATE SKIP
//     LOCKED), of any variables: the rows go only if the step commits;
//  2. lockAndLoad, one batch: lock the variables' rows in key order, then read their
//     definitions (a new snapshot, after any wait for a lock; parsed expressions are
//     cached);
//  3. probeFirsts, one batch of the window functions' first-value probes, when some
//     variable has windows (a moved first value recomputes that variable's whole
//     history);
//  4. replacements, then values.Replace's first batch: the packed days of the ranges
//     cleared (set-based), then per variable one statement that upserts its computed
//     values over its ranges (read as one span when they lie near each other) and
//     deletes those no longer computed, writing only values that differ and answering
//     their timestamps;
//  5. values.Replace's second batch, over what changed only: the tiles holding it
//     (every tier, set-based), the last values (one UPDATE), and queueDependents: the
//     dependents (chains) looked up, then marked (addDirty);
//  6. commit; committed sends the moved last values' notifications (one statement).
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

	rep *values.Replacement // its values' replacement, once built
}

// changeRanges are the timestamps where r's values changed, as merged ranges.
func changeRanges(r *values.Replacement) [][2]int64 {
	rs := make([][2]int64, 0, len(r.Changed)+len(r.Packed))
	for _, ts := range r.Changed {
		rs = append(rs, [2]int64{ts, ts})
	}
	for _, day := range r.Packed {
		rs = append(rs, [2]int64{day, day + (24 * time.Hour).Milliseconds() - 1})
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
	// outside the transaction: NOTIFY takes a database-wide lock at commit
	(&values.Store{Pool: u.Pool, Log: u.Log}).NotifyLastValues(ctx, res.payloads)
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
func (u *Upkeep) recompute(ctx context.Context, tx pgx.Tx, jobs []*job) ([]string, error) {
	live, err := u.lockAndLoad(ctx, tx, jobs)
	if err != nil || len(live) == 0 { // gone: their to-do just goes
		return nil, err
	}
	if err := probeFirsts(ctx, tx, live); err != nil {
		return nil, err
	}
	b, reps, err := replacements(live)
	if err != nil {
		return nil, err
	}
	var dirty dirtyRanges
	payloads, err := values.Replace(ctx, tx, b, reps, func(b *pgx.Batch, changed []*values.Replacement) error {
		u.queueDependents(b, changed, &dirty)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := addDirty(ctx, PgxTx(tx), dirty.vars, dirty.froms, dirty.tos, 0); err != nil {
		return nil, err
	}
	return payloads, nil
}

// lockAndLoad locks the jobs' variables' rows, in key order, then reads their
// definitions, in one round trip: recomputes of one variable (and its definition) run
// one after the other, each seeing what the previous committed. It returns the jobs
// whose variable is still synthetic.
func (u *Upkeep) lockAndLoad(ctx context.Context, tx pgx.Tx, jobs []*job) ([]*job, error) {
	keys := make([]int64, len(jobs))
	byKey := make(map[int64]*job, len(jobs))
	for i, j := range jobs {
		keys[i], byKey[j.key] = j.key, j
	}
	b := &pgx.Batch{}
	b.Queue(lockSQL, keys)
	b.Queue(loadSQL, keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d := &Definition{}
			var text string
			if err := rows.Scan(&d.Key, &d.Account, &d.Label, &text, &d.Inputs, &d.Positional, &d.Firsts); err != nil {
				return err
			}
			var err error
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
	return live, nil
}

// probeFirsts reads the first values of the windows' arguments of the jobs that have
// anchored windows, all in one round trip (job.firsts).
func probeFirsts(ctx context.Context, tx pgx.Tx, live []*job) error {
	b := &pgx.Batch{}
	for _, j := range live {
		if len(j.d.Expr.AnchoredWindows()) == 0 {
			continue
		}
		stmts, err := firstsStatements(j.d)
		if err != nil {
			return fmt.Errorf("synthetic %d: %w", j.key, err)
		}
		now := make([]int64, len(stmts))
		for i, q := range stmts {
			b.Queue(q.SQL, q.Args...).QueryRow(func(row pgx.Row) error { return row.Scan(&now[i]) })
		}
		j.firsts = now
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("first values: %w", err)
	}
	return nil
}

// replacements merges each job's ranges (the whole history when a window's grid
// moved: its new firsts recorded in the batch returned) and builds its replacement:
// one statement per span of its ranges.
func replacements(live []*job) (*pgx.Batch, []*values.Replacement, error) {
	b := &pgx.Batch{}
	reps := make([]*values.Replacement, 0, len(live))
	for _, j := range live {
		j.ranges = mergeN(j.ranges, maxExact)
		if j.firsts != nil && !slices.Equal(j.firsts, j.d.Firsts) {
			j.ranges = [][2]int64{{0, MaxTimestamp}}
			b.Queue(`UPDATE synthetic_variables SET firsts = $2 WHERE variable_id = $1`, j.key, j.firsts)
			j.d.Firsts = j.firsts
		}
		j.rep = &values.Replacement{Key: j.key, Ranges: j.ranges}
		for _, span := range spans(j.ranges) {
			q, err := replaceComputed(j.d, span)
			if err != nil {
				return nil, nil, err
			}
			j.rep.Statements = append(j.rep.Statements, q)
		}
		reps = append(reps, j.rep)
	}
	return b, reps, nil
}

// dirtyRanges are to-do rows to add (addDirty).
type dirtyRanges struct{ vars, froms, tos []int64 }

// queueDependents queues in b the lookup of the synthetic variables reading the
// changed ones (chains): each gets, in dirty, the timestamps the changes affect.
func (u *Upkeep) queueDependents(b *pgx.Batch, changed []*values.Replacement, dirty *dirtyRanges) {
	keys := make([]int64, len(changed))
	changes := make(map[int64][][2]int64, len(changed))
	for i, r := range changed {
		keys[i], changes[r.Key] = r.Key, changeRanges(r)
	}
	b.Queue(dependentsSQL, keys).Query(func(rows pgx.Rows) error {
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
				if in == id {
					continue
				}
				for _, r := range changes[in] {
					lo, hi := e.Affected(r[0], r[1])
					dirty.vars, dirty.froms, dirty.tos = append(dirty.vars, id), append(dirty.froms, max(lo, 0)), append(dirty.tos, min(hi, MaxTimestamp))
				}
			}
		}
		return rows.Err()
	})
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
// computation (values.ReplaceStatement), reading the inputs over the span from its
// first range's start to its last's end.
func replaceComputed(d *Definition, span [][2]int64) (querybuilder.Query, error) {
	q, err := compileRange(d, span[0][0], span[len(span)-1][1], true)
	if err != nil {
		return querybuilder.Query{}, err
	}
	return values.ReplaceStatement(d.Key, span, q)
}
