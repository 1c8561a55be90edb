package values

import (
	"context"
	"fmt"
	"slices"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/querybuilder"
)

// Writers that compute values rather than receive them (the synthetic variables'
// upkeep, pkg/synthetic) replace a variable's values over ranges with the rows of a
// computation: a SELECT of (ts, value), with querybuilder's ? placeholders. The ranges
// become rows only (packed days inside deleted, those cut unpacked), the values that
// differ from the computation are written or deleted, and the tiles over what changed
// and the last values are recomputed, in the caller's transaction, which holds the
// variables' row locks.

// Tx is a transaction of either driver the service uses: pgx (the synthetic upkeep's
// steps) or bun's database/sql (the API's variable routes), with pgx's $n parameters.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) error
	// Query calls each for every row, with the row's Scan.
	Query(ctx context.Context, each func(scan func(dest ...any) error) error, sql string, args ...any) error
}

// ReplaceRange replaces the variable's values in [from, to] (ms, inclusive) with the
// rows compute gives in that range, and recomputes the tiles over it. The caller
// recomputes the last value afterwards (RecomputeLastValues).
func ReplaceRange(ctx context.Context, tx Tx, key, from, to int64, compute querybuilder.Query) error {
	lo, hi := time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	exec := Exec(tx.Exec)
	if err := clearPacked(ctx, exec, key, from, to); err != nil { // the range as rows only
		return err
	}
	var err error
	if from == 0 && to == MaxTimestamp {
		err = tx.Exec(ctx, `DELETE FROM "values" WHERE variable_id = $1`, key)
	} else {
		err = tx.Exec(ctx, `DELETE FROM "values" WHERE variable_id = $1 AND ts BETWEEN $2 AND $3`, key, lo, hi)
	}
	if err != nil {
		return fmt.Errorf("delete values: %w", err)
	}
	ins := querybuilder.Query{SQL: `INSERT INTO "values" (variable_id, ts, value)
SELECT ?::bigint, c.ts, c.value FROM (
` + compute.SQL + `
) c WHERE c.ts BETWEEN ? AND ?`, Args: append(append([]any{key}, compute.Args...), lo, hi)}
	stmt, err := sq.Dollar.ReplacePlaceholders(ins.SQL)
	if err != nil {
		return err
	}
	if err := tx.Exec(ctx, stmt, ins.Args...); err != nil {
		return fmt.Errorf("compute values: %w", err)
	}
	return retileRange(ctx, exec, key, from, to)
}

// ReplaceStatement is the statement bringing the variable's values over ranges (ms,
// inclusive, sorted and apart) to compute's rows, compute reading the span from the
// first range's start to the last's end: values computed and not stored or stored
// otherwise are upserted, values stored and no longer computed deleted; it answers the
// timestamps (ms) of both. Values that equal their computation are not written. The
// statement has pgx's placeholders.
func ReplaceStatement(key int64, ranges [][2]int64, compute querybuilder.Query) (querybuilder.Query, error) {
	from, to := ranges[0][0], ranges[len(ranges)-1][1]
	lo, hi := time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	inside := func(col string) (string, []any) { // col in the ranges
		if len(ranges) == 1 {
			return col + ` BETWEEN ? AND ?`, []any{lo, hi}
		}
		los, his := make([]time.Time, len(ranges)), make([]time.Time, len(ranges))
		for i, r := range ranges {
			los[i], his[i] = time.UnixMilli(r[0]).UTC(), time.UnixMilli(r[1]).UTC()
		}
		return col + ` BETWEEN ? AND ? AND EXISTS (SELECT FROM unnest(?::timestamptz[], ?::timestamptz[]) AS r(lo, hi) WHERE ` +
			col + ` BETWEEN r.lo AND r.hi)`, []any{lo, hi, los, his}
	}
	inC, argsC := inside("c.ts")
	inX, argsX := inside("x.ts")
	args := append(append(slices.Clone(compute.Args), argsC...), key)
	args = append(append(args, argsX...), key)
	stmt, err := sq.Dollar.ReplacePlaceholders(`WITH c AS (
SELECT c.ts, c.value FROM (
` + compute.SQL + `
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
SELECT round(date_part('epoch', ts) * 1000)::bigint FROM gone UNION ALL SELECT round(date_part('epoch', ts) * 1000)::bigint FROM put`)
	if err != nil {
		return querybuilder.Query{}, err
	}
	return querybuilder.Query{SQL: stmt, Args: args}, nil
}

// Replacement is one variable's part of Replace.
type Replacement struct {
	Key int64
	// Ranges are the ranges replaced (ms, inclusive), sorted and apart.
	Ranges [][2]int64
	// Statements bring the values over Ranges to their computation (ReplaceStatement).
	Statements []querybuilder.Query

	// Filled by Replace: the timestamps of the values written or deleted, and the packed
	// days (their start, ms) deleted inside Ranges, whose values changed without a row
	// telling.
	Changed, Packed []int64
}

const (
	minutesPerDay = 24 * 60
	// maxTilePoints: a variable whose changes reach more tiles than this is retiled over
	// its ranges (two statements per tier) rather than tile by tile.
	maxTilePoints = 20000
)

// Replace brings the values of many variables over their ranges to their
// computations, in two round trips whatever their number: first (the caller's
// statements, which run before) with the replacements, then, when some value changed,
// the tiles holding what changed, the last values of the variables that changed and
// what follow queues (it gets those replacements). It returns the last-value
// notifications, for NotifyLastValues once committed.
func Replace(ctx context.Context, tx pgx.Tx, first *pgx.Batch, reps []*Replacement,
	follow func(b *pgx.Batch, changed []*Replacement) error) ([]string, error) {
	if err := queueReplace(ctx, first, reps); err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, first).Close(); err != nil {
		return nil, fmt.Errorf("replace values: %w", err)
	}
	var changed []*Replacement
	var keys []int64
	for _, r := range reps {
		if len(r.Changed) > 0 || len(r.Packed) > 0 {
			changed, keys = append(changed, r), append(keys, r.Key)
		}
	}
	if len(changed) == 0 { // nothing differed: nothing else to do
		return nil, nil
	}
	b := &pgx.Batch{}
	if err := queueTiles(ctx, b, changed); err != nil {
		return nil, err
	}
	var payloads []string
	queueRecomputeLastValues(b, keys, &payloads)
	if follow != nil {
		if err := follow(b, changed); err != nil {
			return nil, err
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("retile: %w", err)
	}
	return payloads, nil
}

// packedInsideSQL lists the packed days that lie inside the (variable, [lo, hi])
// ranges: clearPackedRanges deletes them.
const packedInsideSQL = `SELECT p.variable_id, p.day FROM values_packed p
JOIN unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
  ON p.variable_id = w.variable_id AND p.day >= w.lo AND p.day + INTERVAL '1 day' - INTERVAL '1 microsecond' <= w.hi`

// queueReplace queues in b the ranges as rows only (the packed days inside them noted
// in Packed), then each statement, its changed timestamps noted in Changed.
func queueReplace(ctx context.Context, b *pgx.Batch, reps []*Replacement) error {
	byKey := make(map[int64]*Replacement, len(reps))
	var rk, rlo, rhi []int64
	for _, r := range reps {
		byKey[r.Key] = r
		for _, g := range r.Ranges {
			rk, rlo, rhi = append(rk, r.Key), append(rlo, g[0]), append(rhi, g[1])
		}
	}
	var k int64
	var day time.Time
	b.Queue(packedInsideSQL, rk, millisToTimes(rlo), millisToTimes(rhi)).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k, &day}, func() error {
			if r := byKey[k]; r != nil {
				r.Packed = append(r.Packed, day.UnixMilli())
			}
			return nil
		})
		return err
	})
	if err := clearPackedRanges(ctx, queueIn(b), rk, rlo, rhi); err != nil {
		return err
	}
	for _, r := range reps {
		for _, q := range r.Statements {
			var ts int64
			b.Queue(q.SQL, q.Args...).Query(func(rows pgx.Rows) error {
				_, err := pgx.ForEachRow(rows, []any{&ts}, func() error {
					r.Changed = append(r.Changed, ts)
					return nil
				})
				return err
			})
		}
	}
	return nil
}

// queueTiles queues in b the recompute of the tiles holding what changed: tile by tile,
// or over the whole ranges of a variable whose changes reach more than maxTilePoints.
func queueTiles(ctx context.Context, b *pgx.Batch, changed []*Replacement) error {
	var tileVars, tileTS, bigK, bigLo, bigHi []int64
	for _, r := range changed {
		if n := len(r.Changed) + len(r.Packed)*minutesPerDay; n > maxTilePoints {
			for _, g := range r.Ranges {
				bigK, bigLo, bigHi = append(bigK, r.Key), append(bigLo, g[0]), append(bigHi, g[1])
			}
			continue
		}
		for _, ts := range r.Changed {
			tileVars, tileTS = append(tileVars, r.Key), append(tileTS, ts)
		}
		for _, day := range r.Packed {
			for m := range minutesPerDay {
				tileVars, tileTS = append(tileVars, r.Key), append(tileTS, day+int64(m)*60_000)
			}
		}
	}
	if err := retileRanges(ctx, queueIn(b), 0, bigK, bigLo, bigHi); err != nil {
		return err
	}
	return recomputeTilesAt(ctx, queueIn(b), tileVars, tileTS)
}

// queueIn is an Exec that queues its statements in b.
func queueIn(b *pgx.Batch) Exec {
	return func(_ context.Context, sql string, args ...any) error {
		b.Queue(sql, args...)
		return nil
	}
}

func millisToTimes(ms []int64) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = time.UnixMilli(m).UTC()
	}
	return out
}
