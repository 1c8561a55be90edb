package synthetic

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/querybuilder"
)

// StepRows is a step over the listed to-do rows only, due or not (Step takes the due
// ones): a test can give one step the rows it wants while the instances' workers run.
func (u *Upkeep) StepRows(ctx context.Context, ids []int64) (bool, error) {
	return u.stepSplit(ctx, ids)
}

// RecomputeStatements are the statements a step runs to recompute the synthetic
// variable key over [from, to] (ms): the first-value probes of its anchored windows,
// then the recompute itself (pgx's placeholders).
func RecomputeStatements(ctx context.Context, tx pgx.Tx, key, from, to int64) ([]querybuilder.Query, error) {
	d, err := LoadDefinition(ctx, PgxTx(tx), key)
	if err != nil {
		return nil, err
	}
	out, err := firstsStatements(d)
	if err != nil {
		return nil, err
	}
	q, err := replaceComputed(d, [][2]int64{{from, to}})
	return append(out, q), err
}
