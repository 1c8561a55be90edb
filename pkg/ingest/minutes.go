package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The per-minute rollups (table value_minutes, sql/20261122000020_value_minutes.up.sql)
// change in the same transaction as the values they summarize, always after the
// variable's row is locked (lastValueSQL, or Delete's lock), so that two writers of
// one variable update its minutes one after the other and each statement sees what the
// other committed:
//   - rows that are all new (the fast path) add their per-minute count, sum, min and
//     max to the stored minute (addMinutesSQL): additions commute, so order is free;
//   - when some rows replaced stored ones (the upsert path) or were deleted, min and
//     max cannot be taken back: those minutes are recomputed from "values"
//     (recomputeMinutesSQL).

const minuteMs = int64(time.Minute / time.Millisecond)

// minuteOf is the start of the UTC minute holding a millisecond timestamp (floor, also
// before 1970).
func minuteOf(ms int64) int64 {
	m := ms / minuteMs * minuteMs
	if m > ms {
		m -= minuteMs
	}
	return m
}

// minuteSums are the rollups of a batch, as parallel arrays for unnest.
type minuteSums struct {
	vars    []int64
	minutes []time.Time
	n       []int32
	sum     []float64
	min     []float64
	max     []float64
}

// sumMinutes rolls rows up per (variable, minute); rows are sorted by (variable, ts).
func sumMinutes(rows []row) minuteSums {
	var s minuteSums
	last := -1
	for i, r := range rows {
		m := minuteOf(r.ts)
		if i == 0 || r.variable != rows[i-1].variable || m != minuteOf(rows[i-1].ts) {
			s.vars = append(s.vars, r.variable)
			s.minutes = append(s.minutes, time.UnixMilli(m).UTC())
			s.n = append(s.n, 0)
			s.sum = append(s.sum, 0)
			s.min = append(s.min, r.value)
			s.max = append(s.max, r.value)
			last++
		}
		s.n[last]++
		s.sum[last] += r.value
		s.min[last] = min(s.min[last], r.value)
		s.max[last] = max(s.max[last], r.value)
	}
	return s
}

// addMinutesSQL adds new rows' rollups to their minutes.
const addMinutesSQL = `INSERT INTO value_minutes AS m (variable_id, minute, n, sum, min, max)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::float8[], $5::float8[], $6::float8[])
ON CONFLICT (variable_id, minute) DO UPDATE
SET n = m.n + EXCLUDED.n, sum = m.sum + EXCLUDED.sum,
    min = least(m.min, EXCLUDED.min), max = greatest(m.max, EXCLUDED.max)`

// recomputeMinutesSQL rebuilds the listed (variable, minute) rollups from "values",
// removing those whose minute holds no value any more.
const recomputeMinutesSQL = `WITH wanted AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, minute)
), fresh AS (
    SELECT w.variable_id, w.minute, s.n, s.sum, s.min, s.max
    FROM wanted w
    CROSS JOIN LATERAL (
        SELECT count(*)::int AS n, sum(value) AS sum, min(value) AS min, max(value) AS max
        FROM "values"
        WHERE variable_id = w.variable_id AND ts >= w.minute AND ts < w.minute + INTERVAL '1 minute'
    ) s
), emptied AS (
    DELETE FROM value_minutes m USING fresh f
    WHERE f.n = 0 AND m.variable_id = f.variable_id AND m.minute = f.minute
)
INSERT INTO value_minutes AS m (variable_id, minute, n, sum, min, max)
SELECT * FROM fresh WHERE n > 0
ON CONFLICT (variable_id, minute) DO UPDATE
SET n = EXCLUDED.n, sum = EXCLUDED.sum, min = EXCLUDED.min, max = EXCLUDED.max`

// deleteMinutes follows a delete of the variable's values in [start, end]: the minutes
// inside the range lost all their values, the (at most two) minutes at its ends only
// some.
func deleteMinutes(ctx context.Context, tx pgx.Tx, key int64, start, end time.Time) error {
	first := time.UnixMilli(minuteOf(start.UnixMilli())).UTC()
	last := time.UnixMilli(minuteOf(end.UnixMilli())).UTC()
	if _, err := tx.Exec(ctx, `DELETE FROM value_minutes WHERE variable_id = $1 AND minute > $2 AND minute < $3`,
		key, first, last); err != nil {
		return fmt.Errorf("delete minute rollups: %w", err)
	}
	keys, minutes := []int64{key, key}, []time.Time{first, last}
	if first.Equal(last) {
		keys, minutes = keys[:1], minutes[:1] // one row may be upserted once per statement
	}
	if _, err := tx.Exec(ctx, recomputeMinutesSQL, keys, minutes); err != nil {
		return fmt.Errorf("recompute minute rollups: %w", err)
	}
	return nil
}

// RebuildMinutes recomputes every variable's minute rollups from minute since on (the
// zero time: all of them) from "values", one variable per transaction under the same
// lock writers take, so it can run while the service writes. It repairs rollups that
// something outside the write path left behind: values written by a binary older than
// the rollups during a rolling upgrade, or rows loaded into "values" by hand.
// progress, when not nil, is called after each variable.
func (s *Store) RebuildMinutes(ctx context.Context, since time.Time, progress func(done, total int)) error {
	ids, err := s.variableKeys(ctx)
	if err != nil {
		return fmt.Errorf("rebuild minute rollups: %w", err)
	}
	for i, id := range ids {
		if err := s.RebuildVariable(ctx, id, since); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return nil
}

// RebuildVariable recomputes one variable's minute rollups from the minute holding
// since on, in one transaction under the writers' lock.
func (s *Store) RebuildVariable(ctx context.Context, id int64, since time.Time) error {
	since = time.UnixMilli(minuteOf(since.UnixMilli())).UTC()
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// a variable deleted meanwhile locks no row: its values and rollups are gone
		if _, err := tx.Exec(ctx, `SELECT FROM variables WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM value_minutes WHERE variable_id = $1 AND minute >= $2`, id, since); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO value_minutes (variable_id, minute, n, sum, min, max)
			SELECT variable_id, time_bucket(INTERVAL '1 minute', ts), count(*), sum(value), min(value), max(value)
			FROM "values" WHERE variable_id = $1 AND ts >= $2
			GROUP BY 1, 2`, id, since)
		return err
	})
	if err != nil {
		return fmt.Errorf("rebuild minute rollups of variable %d: %w", id, err)
	}
	return nil
}

// Mismatch is a minute whose rollup differs from its values (n: raw count, rollup n).
type Mismatch struct {
	Variable  int64
	Minute    time.Time
	N, Rolled *int32
}

// checkMinutesSQL compares one variable's rollups from a minute on with its values.
// Sums are added up batch by batch on the write path, so they may differ from a fresh
// sum in the last bits: compared relatively.
const checkMinutesSQL = `SELECT coalesce(t.minute, m.minute), t.n, m.n
FROM (SELECT time_bucket(INTERVAL '1 minute', ts) AS minute, count(*)::int AS n, sum(value) AS sum,
             min(value) AS min, max(value) AS max
      FROM "values" WHERE variable_id = $1 AND ts >= $2 GROUP BY 1) t
FULL JOIN (SELECT minute, n, sum, min, max FROM value_minutes WHERE variable_id = $1 AND minute >= $2) m
  USING (minute)
WHERE t.n IS DISTINCT FROM m.n OR t.min IS DISTINCT FROM m.min OR t.max IS DISTINCT FROM m.max
   OR abs(t.sum - m.sum) > 1e-9 * greatest(abs(t.sum), abs(m.sum), 1)
ORDER BY 1 LIMIT 1000`

// CheckMinutes compares every variable's minute rollups from minute since on with its
// values and returns the minutes that differ, up to 1000 per variable. progress, when
// not nil, is called after each variable.
func (s *Store) CheckMinutes(ctx context.Context, since time.Time, progress func(done, total int)) ([]Mismatch, error) {
	ids, err := s.variableKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("check minute rollups: %w", err)
	}
	var out []Mismatch
	for i, id := range ids {
		ms, err := s.CheckVariable(ctx, id, since)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	return out, nil
}

// CheckVariable compares one variable's minute rollups from the minute holding since
// on with its values (up to 1000 differing minutes).
func (s *Store) CheckVariable(ctx context.Context, id int64, since time.Time) ([]Mismatch, error) {
	since = time.UnixMilli(minuteOf(since.UnixMilli())).UTC()
	rows, err := s.Pool.Query(ctx, checkMinutesSQL, id, since)
	if err != nil {
		return nil, fmt.Errorf("check minute rollups of variable %d: %w", id, err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
		m := Mismatch{Variable: id}
		return m, r.Scan(&m.Minute, &m.N, &m.Rolled)
	})
	if err != nil {
		return nil, fmt.Errorf("check minute rollups of variable %d: %w", id, err)
	}
	return ms, nil
}

// variableKeys lists every variable's key, in order.
func (s *Store) variableKeys(ctx context.Context) ([]int64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT id FROM variables ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	return ids, nil
}
