package synthetic

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Difference is a timestamp where a synthetic variable's stored value and the
// recomputation from its inputs differ (nil: no value on that side).
type Difference struct {
	TS               int64
	Stored, Computed *float64
}

// Tolerance is how far a stored value may be from the recomputation: sums taken in
// another order (a live update's running sum) differ in the last bits.
const Tolerance = 1e-9

// Checked is one synthetic variable compared with its recomputation.
type Checked struct {
	Key         int64
	Name        string // device label.variable label
	Differences []Difference
}

// Check compares every synthetic variable (or only those listed) with a recomputation
// from its inputs' current values, each in one snapshot; limit bounds the differences
// listed per variable.
func Check(ctx context.Context, pool *pgxpool.Pool, only []int64, limit int) ([]Checked, error) {
	rows, err := pool.Query(ctx, `SELECT s.variable_id, d.label || '.' || v.label FROM synthetic_variables s
		JOIN variables v ON v.id = s.variable_id JOIN devices d ON d.id = v.device_id
		WHERE cardinality($1::bigint[]) = 0 OR s.variable_id = ANY($1) ORDER BY 2`, only)
	if err != nil {
		return nil, fmt.Errorf("synthetic check: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Checked, error) {
		var c Checked
		return c, r.Scan(&c.Key, &c.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("synthetic check: %w", err)
	}
	for i := range out {
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			d, err := LoadDefinition(ctx, PgxTx(tx), out[i].Key)
			if err != nil || d == nil {
				return err
			}
			q, err := compileRange(d, 0, MaxTimestamp, false)
			if err != nil {
				return err
			}
			q.SQL = `SELECT round(date_part('epoch', coalesce(c.ts, s.ts)) * 1000)::bigint, s.value, c.value
FROM (` + q.SQL + `) c
FULL JOIN (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint
           UNION ALL SELECT ts, value FROM packed_values(ARRAY[?::bigint], '-infinity', 'infinity')) s ON s.ts = c.ts
WHERE c.ts IS NULL OR s.ts IS NULL OR abs(c.value - s.value) > ? * greatest(1, abs(c.value))
ORDER BY 1 LIMIT ?`
			q.Args = append(q.Args, d.Key, d.Key, Tolerance, limit)
			stmt, err := dollar(q)
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, stmt, q.Args...)
			if err != nil {
				return err
			}
			out[i].Differences, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Difference, error) {
				var d Difference
				return d, r.Scan(&d.TS, &d.Stored, &d.Computed)
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("synthetic check %s: %w", out[i].Name, err)
		}
	}
	return out, nil
}
