package synthetic

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// MaxTimestamp is the last timestamp a value may have (API.md §6); [0, MaxTimestamp]
// is a synthetic variable's whole history.
const MaxTimestamp = values.MaxTimestamp

// Tx is a transaction of either driver the service uses (values.Tx).
type Tx = values.Tx

// PgxTx adapts a pgx transaction.
func PgxTx(tx pgx.Tx) Tx { return pgxTx{tx} }

// SQLTx adapts a database/sql transaction (bun's tx.Tx).
func SQLTx(tx *sql.Tx) Tx { return sqlTx{tx} }

type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.Exec(ctx, sql, args...)
	return err
}

func (t pgxTx) Query(ctx context.Context, each func(func(...any) error) error, sql string, args ...any) error {
	rows, err := t.tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, sql, args...)
	return err
}

func (t sqlTx) Query(ctx context.Context, each func(func(...any) error) error, sql string, args ...any) error {
	rows, err := t.tx.QueryContext(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Definition is a synthetic variable as the upkeep computes it.
type Definition struct {
	Key        int64
	Account    int64
	Label      string
	Expr       *querybuilder.Expr
	Inputs     []int64
	Positional bool
	Firsts     []int64
}

// LoadDefinition reads one synthetic variable's definition; nil when the variable is
// gone or not synthetic.
func LoadDefinition(ctx context.Context, tx Tx, key int64) (*Definition, error) {
	var d *Definition
	err := tx.Query(ctx, func(scan func(...any) error) error {
		var expr []byte
		var inputs, firsts string
		x := &Definition{Key: key}
		if err := scan(&x.Account, &x.Label, &expr, &inputs, &x.Positional, &firsts); err != nil {
			return err
		}
		if err := errors.Join(json.Unmarshal([]byte(inputs), &x.Inputs), json.Unmarshal([]byte(firsts), &x.Firsts)); err != nil {
			return fmt.Errorf("synthetic variable %d: %w", key, err)
		}
		x.Expr = new(querybuilder.Expr)
		if err := json.Unmarshal(expr, x.Expr); err != nil {
			return fmt.Errorf("synthetic variable %d: stored expression: %w", key, err)
		}
		d = x
		return nil
	}, `SELECT s.account_id, v.label, s.expression::text, array_to_json(s.inputs)::text, s.positional, array_to_json(s.firsts)::text
		FROM synthetic_variables s JOIN variables v ON v.id = s.variable_id WHERE s.variable_id = $1`, key)
	if err != nil {
		return nil, fmt.Errorf("load synthetic variable: %w", err)
	}
	return d, nil
}

// dollar turns a compiled statement's ? placeholders into pgx's $n.
func dollar(q querybuilder.Query) (string, error) {
	return sq.Dollar.ReplacePlaceholders(q.SQL)
}

// compileRange is the statement computing d's values with timestamps in [from, to]
// (the whole history when that is [0, MaxTimestamp]); live: d's stored values before
// from are its expression's (the step's recomputes), so a running sum may carry on
// from them (querybuilder.SyntheticRequest.Self).
func compileRange(d *Definition, from, to int64, live bool) (querybuilder.Query, error) {
	// newest first, the values index's order: a backfill's insert fills it as appends
	r := querybuilder.SyntheticRequest{Expr: d.Expr, NewestFirst: true}
	if live { // the step: d's stored values before from are up to date
		r.Self = d.Key
	}
	if from > 0 {
		t := time.UnixMilli(from).UTC()
		r.From = &t
	}
	if to < MaxTimestamp {
		t := time.UnixMilli(to).UTC()
		r.To = &t
	}
	return querybuilder.Synthetic(r)
}

// Replace recomputes d's values with timestamps in [from, to] (ms, inclusive) in tx
// (values.ReplaceRange). The caller holds the variable's row lock and updates the last
// value afterwards (LastValue).
func Replace(ctx context.Context, tx Tx, d *Definition, from, to int64) error {
	from, to = max(from, 0), min(to, MaxTimestamp)
	if from > to {
		return nil
	}
	q, err := compileRange(d, from, to, false)
	if err != nil {
		return err
	}
	if err := values.ReplaceRange(ctx, tx, d.Key, from, to, q); err != nil {
		return fmt.Errorf("synthetic %d: %w", d.Key, err)
	}
	return nil
}

// LastValue recomputes the variable's lastValue; payload is the last-value
// notification to send once committed ("" when it did not move).
func LastValue(ctx context.Context, tx Tx, key int64) (payload string, err error) {
	payloads, err := values.RecomputeLastValues(ctx, tx, []int64{key})
	if err != nil {
		return "", fmt.Errorf("synthetic %d: %w", key, err)
	}
	if len(payloads) == 0 {
		return "", nil
	}
	return payloads[0], nil
}

// Firsts are the first timestamps (ms; -1: none) of the arguments of d's window
// functions now.
func Firsts(ctx context.Context, tx Tx, d *Definition) ([]int64, error) {
	stmts, err := firstsStatements(d)
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(stmts))
	for _, q := range stmts {
		var first int64
		if err := tx.Query(ctx, func(scan func(...any) error) error { return scan(&first) }, q.SQL, q.Args...); err != nil {
			return nil, fmt.Errorf("synthetic %d: first values: %w", d.Key, err)
		}
		out = append(out, first)
	}
	return out, nil
}

// firstsStatements are the statements Firsts runs, one per window function of d, each
// answering one bigint (pgx's $n placeholders).
func firstsStatements(d *Definition) ([]querybuilder.Query, error) {
	ws := d.Expr.AnchoredWindows()
	out := make([]querybuilder.Query, 0, len(ws))
	for _, w := range ws {
		q, err := querybuilder.SyntheticFirst(w.Args[0])
		if err != nil {
			return nil, err
		}
		q.SQL = `SELECT coalesce((SELECT round(date_part('epoch', f.ts) * 1000)::bigint FROM (` + q.SQL + `) f LIMIT 1), -1)`
		if q.SQL, err = dollar(q); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// Recompute brings d's stored values over the ranges up to date in tx, and
// everything when a window's grid moved (its argument's first value changed): the
// ranges are merged first. It records the firsts, updates the last value and marks
// d's dependents over what it recomputed. The caller holds the variable's row lock.
func Recompute(ctx context.Context, tx Tx, d *Definition, ranges [][2]int64) (payload string, err error) {
	ranges = merge(ranges)
	if len(d.Expr.AnchoredWindows()) > 0 {
		now, err := Firsts(ctx, tx, d)
		if err != nil {
			return "", err
		}
		if !slices.Equal(now, d.Firsts) {
			ranges = [][2]int64{{0, MaxTimestamp}}
			if err := tx.Exec(ctx, `UPDATE synthetic_variables SET firsts = $2 WHERE variable_id = $1`, d.Key, now); err != nil {
				return "", fmt.Errorf("synthetic %d: record firsts: %w", d.Key, err)
			}
			d.Firsts = now
		}
	}
	for _, r := range ranges {
		if err := Replace(ctx, tx, d, r[0], r[1]); err != nil {
			return "", err
		}
	}
	if payload, err = LastValue(ctx, tx, d.Key); err != nil {
		return "", err
	}
	return payload, markDependents(ctx, tx, d.Key, ranges)
}

// markDependents adds the recompute of the synthetic variables reading key over the
// timestamps its change over ranges affects (chained synthetic variables).
func markDependents(ctx context.Context, tx Tx, key int64, ranges [][2]int64) error {
	var vars, froms, tos []int64
	err := tx.Query(ctx, func(scan func(...any) error) error {
		var id int64
		var raw []byte
		if err := scan(&id, &raw); err != nil {
			return err
		}
		var e querybuilder.Expr
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		for _, r := range ranges {
			lo, hi := e.Affected(r[0], r[1])
			vars, froms, tos = append(vars, id), append(froms, max(lo, 0)), append(tos, min(hi, MaxTimestamp))
		}
		return nil
	}, `SELECT variable_id, expression::text FROM synthetic_variables WHERE inputs @> ARRAY[$1::bigint] AND variable_id <> $1`, key)
	if err != nil {
		return fmt.Errorf("synthetic %d: dependents: %w", key, err)
	}
	return addDirty(ctx, tx, vars, froms, tos, 0)
}

// addDirty inserts to-do rows, due after delay.
func addDirty(ctx context.Context, tx Tx, vars, froms, tos []int64, delay time.Duration) error {
	if len(vars) == 0 {
		return nil
	}
	err := tx.Exec(ctx, `INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts, not_before)
		SELECT v, f, t, now() + make_interval(secs => $4) FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(v, f, t)`,
		vars, froms, tos, delay.Seconds())
	if err != nil {
		return fmt.Errorf("synthetic: mark for recompute: %w", err)
	}
	return nil
}

// merge sorts ranges and joins those that overlap or touch; more than maxRanges
// become the one range spanning them all.
func merge(ranges [][2]int64) [][2]int64 { return mergeN(ranges, 16) }

// mergeN is merge with at most maxRanges ranges.
func mergeN(ranges [][2]int64, maxRanges int) [][2]int64 {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b [2]int64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	var out [][2]int64
	for _, r := range rs {
		r[0], r[1] = max(r[0], 0), min(r[1], MaxTimestamp)
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	if len(out) > maxRanges {
		out = [][2]int64{{out[0][0], out[len(out)-1][1]}}
	}
	return out
}

// ErrNotSynthetic: the variable has no expression.
var ErrNotSynthetic = errors.New("not a synthetic variable")

// Statement is the statement computing a synthetic variable's whole history, as the
// backfill runs it (explain=sql).
func Statement(ctx context.Context, tx Tx, key int64) (querybuilder.Query, error) {
	d, err := LoadDefinition(ctx, tx, key)
	if err != nil {
		return querybuilder.Query{}, err
	}
	if d == nil {
		return querybuilder.Query{}, ErrNotSynthetic
	}
	q, err := compileRange(d, 0, MaxTimestamp, false)
	q.Notes = []string{querybuilder.SyntheticNote}
	return q, err
}
