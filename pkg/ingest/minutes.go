package ingest

import (
	"context"
	"fmt"
	"math"
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
	ks      []float64 // sum of (value - min)
	m2      []float64 // sum of squared deviations from the minute's mean
}

// spreadLimit is the largest magnitude whose spread is kept: a square beyond it would
// overflow double precision. A minute holding a larger value has no spread (NULL), and
// std over a range with such a minute is null rather than an error.
const spreadLimit = 1e150

// spread is the minute's shifted sum and sum of squared deviations, in two passes over
// values shifted by the minute's min; NaN (stored as NULL) beyond spreadLimit.
func spread(rows []row, lo, hi float64) (float64, float64) {
	if math.Abs(lo) > spreadLimit || math.Abs(hi) > spreadLimit {
		return math.NaN(), math.NaN()
	}
	ks := 0.0
	for _, r := range rows {
		ks += r.value - lo
	}
	mean, m2 := ks/float64(len(rows)), 0.0
	for _, r := range rows {
		d := r.value - lo - mean
		m2 += d * d
	}
	return ks, m2
}

// sumMinutes rolls rows up per (variable, minute); rows are sorted by (variable, ts).
func sumMinutes(rows []row) minuteSums {
	var s minuteSums
	for i := 0; i < len(rows); {
		j := i + 1 // rows[i:j] is one (variable, minute)
		for j < len(rows) && rows[j].variable == rows[i].variable && minuteOf(rows[j].ts) == minuteOf(rows[i].ts) {
			j++
		}
		s.add(rows[i].variable, minuteOf(rows[i].ts), rows[i:j])
		i = j
	}
	return s
}

// add appends one minute's rollup. The spread is computed in two passes over values
// shifted by the minute's min, which keeps it exact to the last bits however large
// the values are.
func (s *minuteSums) add(variable, minute int64, rows []row) {
	lo, hi, sum := rows[0].value, rows[0].value, 0.0
	for _, r := range rows {
		lo, hi, sum = min(lo, r.value), max(hi, r.value), sum+r.value
	}
	ks, m2 := spread(rows, lo, hi)
	s.vars = append(s.vars, variable)
	s.minutes = append(s.minutes, time.UnixMilli(minute).UTC())
	s.n = append(s.n, int32(len(rows)))
	s.sum, s.min, s.max = append(s.sum, sum), append(s.min, lo), append(s.max, hi)
	s.ks, s.m2 = append(s.ks, ks), append(s.m2, m2)
}

// addMinutesSQL adds new rows' rollups to their minutes. The spread merges by Chan et
// al.'s formula, both parts' shifted sums moved to the new min first (every SET
// expression reads the row as it was):
//
//	ks = ks₁ + n₁(min₁ − min) + ks₂ + n₂(min₂ − min)
//	m2 = m2₁ + m2₂ + δ²·n₁n₂/(n₁+n₂),  δ = (ks₂/n₂ + min₂) − (ks₁/n₁ + min₁)
//
// A part without a spread (NULL: beyond spreadLimit) leaves the minute without one.
const addMinutesSQL = `INSERT INTO value_minutes AS m (variable_id, minute, n, sum, min, max, ks, m2)
SELECT v, mi, n, s, lo, hi, nullif(k, 'NaN'), nullif(q, 'NaN')
FROM unnest($1::bigint[], $2::timestamptz[], $3::int[], $4::float8[], $5::float8[], $6::float8[],
            $7::float8[], $8::float8[]) AS u(v, mi, n, s, lo, hi, k, q)
ON CONFLICT (variable_id, minute) DO UPDATE
SET n = m.n + EXCLUDED.n, sum = m.sum + EXCLUDED.sum,
    min = least(m.min, EXCLUDED.min), max = greatest(m.max, EXCLUDED.max),
    ks = CASE WHEN m.ks IS NOT NULL AND EXCLUDED.ks IS NOT NULL -- both within ±1e150: nothing overflows
        THEN m.ks + m.n * (m.min - least(m.min, EXCLUDED.min))
           + EXCLUDED.ks + EXCLUDED.n * (EXCLUDED.min - least(m.min, EXCLUDED.min)) END,
    m2 = CASE WHEN m.ks IS NOT NULL AND EXCLUDED.ks IS NOT NULL
        THEN m.m2 + EXCLUDED.m2
           + power((EXCLUDED.ks / EXCLUDED.n - m.ks / m.n) + (EXCLUDED.min - m.min), 2)
             * m.n * EXCLUDED.n / (m.n + EXCLUDED.n) END`

// recomputeMinutesSQL rebuilds the listed (variable, minute) rollups from "values",
// removing those whose minute holds no value any more.
const recomputeMinutesSQL = `WITH wanted AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, minute)
), fresh AS (
    SELECT w.variable_id, w.minute, s.n, s.sum, s.min, s.max, k.ks, k.m2
    FROM wanted w
    CROSS JOIN LATERAL (
        SELECT count(*)::int AS n, sum(value) AS sum, min(value) AS min, max(value) AS max
        FROM "values"
        WHERE variable_id = w.variable_id AND ts >= w.minute AND ts < w.minute + INTERVAL '1 minute'
    ) s
    CROSS JOIN LATERAL (
        SELECT sum(value - s.min) AS ks, var_pop(value - s.min) * count(*) AS m2
        FROM "values"
        WHERE variable_id = w.variable_id AND ts >= w.minute AND ts < w.minute + INTERVAL '1 minute'
          AND greatest(abs(s.min), abs(s.max)) <= 1e150 -- no spread beyond spreadLimit: NULL
    ) k
), emptied AS (
    DELETE FROM value_minutes m USING fresh f
    WHERE f.n = 0 AND m.variable_id = f.variable_id AND m.minute = f.minute
)
INSERT INTO value_minutes AS m (variable_id, minute, n, sum, min, max, ks, m2)
SELECT * FROM fresh WHERE n > 0
ON CONFLICT (variable_id, minute) DO UPDATE
SET n = EXCLUDED.n, sum = EXCLUDED.sum, min = EXCLUDED.min, max = EXCLUDED.max, ks = EXCLUDED.ks, m2 = EXCLUDED.m2`

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
		_, err := tx.Exec(ctx, rebuildMinutesSQL, id, since)
		return err
	})
	if err != nil {
		return fmt.Errorf("rebuild minute rollups of variable %d: %w", id, err)
	}
	return nil
}

// rebuildMinutesSQL computes a variable's minutes from since on; the spread is shifted
// by each minute's min (see addMinutesSQL).
const rebuildMinutesSQL = `INSERT INTO value_minutes (variable_id, minute, n, sum, min, max, ks, m2)
SELECT $1, minute, count(*), sum(value), min(value), max(value),
       -- the FILTERs keep the aggregates from overflowing; the CASEs drop what they saw
       CASE WHEN max(abs(value)) <= 1e150 THEN sum(value - lo) FILTER (WHERE abs(lo) <= 1e150 AND abs(value) <= 1e150) END,
       CASE WHEN max(abs(value)) <= 1e150 THEN var_pop(value - lo) FILTER (WHERE abs(lo) <= 1e150 AND abs(value) <= 1e150) * count(*) END
FROM (SELECT time_bucket(INTERVAL '1 minute', ts) AS minute, value,
             min(value) OVER (PARTITION BY time_bucket(INTERVAL '1 minute', ts)) AS lo
      FROM "values" WHERE variable_id = $1 AND ts >= $2) x
GROUP BY minute`

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
             min(value) AS min, max(value) AS max,
             CASE WHEN max(abs(value)) <= 1e150 THEN var_pop(value) FILTER (WHERE abs(value) <= 1e150) * count(*) END AS m2
      FROM "values" WHERE variable_id = $1 AND ts >= $2 GROUP BY 1) t
FULL JOIN (SELECT minute, n, sum, min, max, m2 FROM value_minutes WHERE variable_id = $1 AND minute >= $2) m
  USING (minute)
WHERE t.n IS DISTINCT FROM m.n OR t.min IS DISTINCT FROM m.min OR t.max IS DISTINCT FROM m.max
   OR abs(t.sum - m.sum) > 1e-9 * greatest(abs(t.sum), abs(m.sum), 1)
   OR (t.m2 IS NULL) <> (m.m2 IS NULL)
   OR abs(t.m2 - m.m2) > 1e-9 * greatest(t.m2, m.m2) + 1e-12 * greatest(abs(t.min), abs(t.max), 1) ^ 2
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
