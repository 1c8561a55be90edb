package values

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// The packed layout (sql/20261126300001_values_packed.up.sql): a (variable, UTC day)
// whose values are older than the late-data window is one row of lz4-compressed
// arrays in values_packed instead of rows of "values" and tiles of value_minutes.
// A day is in exactly one layout at any time: PackDay moves it in one transaction,
// and every writer into a packed day moves it back first (unpackOld), so readers take
// the union of both layouts without deduplicating.

// PackedAge is how old a dot must be (at least) before its day can be packed: writers
// look for packed days only among dots older than it, so the packer must never pack a
// day that ends less than PackedAge ago (Packer.Run refuses a shorter window). A
// day's margin covers clocks of instances and database apart by less than a day.
const PackedAge = 24 * time.Hour

// Day is the UTC day holding t (packed rows are per UTC day).
func Day(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// packDaySQL moves one (variable, day)'s rows ($1, $2) into one packed row. Each
// timestamp is stored as its residual from the straight line through the day's first
// and last (ms): a regular series stores zeros, which lz4 reduces to almost nothing.
// created_at is kept rounded to the millisecond, as the API shows it. The residuals'
// bounds (ts_rmin, ts_rmax) let readers unnest only the positions that can hold the
// minutes they need (sql/20261127300001_packed_slices.up.sql). The line is one
// aggregate (MATERIALIZED: computed once, not per dot), the arrays one sort by
// timestamp, and the arithmetic float8 (exact here: whole milliseconds within a day,
// or between two created_at, are far inside a double's 53 bits): 14 ms for a day at
// 10 s where numeric arithmetic and a window per column took 40. It answers how many
// rows it moved and whether one had a timestamp finer than a millisecond (PackDay then
// rolls back).
const packDaySQL = `WITH moved AS (
    DELETE FROM "values" WHERE variable_id = $1 AND ts >= $2 AND ts < $2 + INTERVAL '1 day'
    RETURNING ts, value, context, date_trunc('milliseconds', created_at + INTERVAL '500 microseconds') AS created
), dots AS (
    SELECT m.*, row_number() OVER (ORDER BY ts) AS i FROM moved m
), line AS MATERIALIZED (
    SELECT n, ts_base, created_base,
           CASE WHEN n > 1 THEN round(date_part('epoch', ts_last - ts_base) * 1000 / (n - 1))::bigint ELSE 0 END AS ts_step,
           CASE WHEN n > 1 THEN round(date_part('epoch', created_last - created_base) * 1000 / (n - 1))::bigint ELSE 0 END AS created_step
    FROM (SELECT count(*) AS n, min(ts) AS ts_base, max(ts) AS ts_last,
                 first(created, ts) AS created_base, last(created, ts) AS created_last FROM moved) a
), residuals AS (
    SELECT d.i, d.value, d.context,
           (round(date_part('epoch', d.ts - l.ts_base) * 1000) - (d.i - 1) * l.ts_step)::int AS r,
           (round(date_part('epoch', d.created - l.created_base) * 1000) - (d.i - 1) * l.created_step)::bigint AS created_r
    FROM dots d CROSS JOIN line l
), packed AS (
INSERT INTO values_packed (variable_id, day, n, ts_base, ts_step, ts_r, ts_rmin, ts_rmax, value, created_base, created_step,
                           created_r, context)
SELECT $1, $2, any_value(l.n), any_value(l.ts_base), any_value(l.ts_step),
       array_agg(d.r ORDER BY d.i), min(d.r), max(d.r),
       array_agg(d.value ORDER BY d.i),
       any_value(l.created_base), any_value(l.created_step),
       array_agg(d.created_r ORDER BY d.i),
       jsonb_object_agg(d.i, d.context) FILTER (WHERE d.context IS NOT NULL)
FROM residuals d CROSS JOIN line l
HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM moved)::int, (SELECT coalesce(bool_or(ts <> date_trunc('milliseconds', ts)), false) FROM moved)`

// PackDay packs one (variable, day) in a transaction of its own, under the variable's
// row lock (writers take it before they look for packed days), and returns how many
// values it packed: 0, and nothing changed, when the day has no rows, a timestamp finer
// than a millisecond (loaded by hand: the packed layout keeps milliseconds), or ends
// after the variable's rollups_until (a packed day has no minute tiles to build its
// tiles from: see rollupmark.go).
func (s *Store) PackDay(ctx context.Context, variable int64, day time.Time) (int, error) {
	packed := 0
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var mark time.Time
		var hasPacked bool
		b := &pgx.Batch{}
		b.Queue(`SELECT rollups_until FROM variables WHERE id = $1 FOR NO KEY UPDATE`, variable).QueryRow(func(r pgx.Row) error {
			return r.Scan(&mark)
		})
		b.Queue(`SELECT EXISTS (SELECT FROM values_packed WHERE variable_id = $1 AND day = $2)`, variable, day).QueryRow(func(r pgx.Row) error {
			return r.Scan(&hasPacked)
		})
		err := tx.SendBatch(ctx, b).Close()
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && day.Add(24*time.Hour).After(mark)) {
			return errNothingPacked // deleted; or its values still have to make its tiles (CatchUp)
		}
		if err != nil {
			return fmt.Errorf("lock variable: %w", err)
		}
		// a packed row for the day already (a writer never leaves one beside rows; a
		// day packed by hand might): merge it in
		if hasPacked {
			if err := unpackDays(ctx, execIn(tx), []int64{variable}, []time.Time{day}); err != nil {
				return err
			}
		}
		// the pack and the minute tiles' delete in one round trip; the transaction
		// rolls back when the day held no rows or a timestamp finer than a millisecond
		var rows int
		var fine bool
		b = &pgx.Batch{}
		b.Queue(packDaySQL, variable, day).QueryRow(func(r pgx.Row) error { return r.Scan(&rows, &fine) })
		b.Queue(`DELETE FROM `+tiers.All[0].Table+` WHERE variable_id = $1 AND tile >= $2 AND tile < $2 + INTERVAL '1 day'`,
			variable, day)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		if rows == 0 || fine {
			return errNothingPacked
		}
		packed = rows
		return nil
	})
	if errors.Is(err, errNothingPacked) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pack variable %d day %s: %w", variable, day.Format(time.DateOnly), err)
	}
	return packed, nil
}

// errNothingPacked rolls PackDay's transaction back: the day stays as it was.
var errNothingPacked = errors.New("nothing to pack")

// unpackSQL moves the packed days among ($1, $2) back into rows of "values" and
// restores their minute tiles, in the caller's transaction. $3 and $4 are the first
// and last of the days ($2): with them the planner leaves out the chunks outside
// (daysBetween), which a join on the days alone cannot tell it.
var unpackSQL = []string{
	`INSERT INTO "values" (variable_id, ts, value, context, created_at)
SELECT x.variable_id, x.ts, x.value, x.context, x.created_at
FROM values_packed p
JOIN (SELECT DISTINCT * FROM unnest($1::bigint[], $2::timestamptz[])) AS w(variable_id, day) ON p.variable_id = w.variable_id AND p.day = w.day
CROSS JOIN LATERAL packed_rows(ARRAY[p.variable_id], p.day, p.day + INTERVAL '1 day' - INTERVAL '1 microsecond') x
WHERE ` + daysBetween,
	`INSERT INTO ` + tiers.All[0].Table + ` (` + tileColumns + `)
SELECT t.* FROM values_packed p
JOIN (SELECT DISTINCT * FROM unnest($1::bigint[], $2::timestamptz[])) AS w(variable_id, day) ON p.variable_id = w.variable_id AND p.day = w.day
CROSS JOIN LATERAL (` + rawTileSQL(interval(tiers.All[0]), rowsSource,
		`x.variable_id = p.variable_id AND x.ts >= p.day AND x.ts < p.day + INTERVAL '1 day'
        AND x.ts >= $3::timestamptz AND x.ts < $4::timestamptz + INTERVAL '1 day'`) + `) t
WHERE ` + daysBetween,
	`DELETE FROM values_packed p USING unnest($1::bigint[], $2::timestamptz[]) AS w(variable_id, day)
WHERE p.variable_id = w.variable_id AND p.day = w.day AND ` + daysBetween,
}

// daysBetween bounds the packed days of a statement on (variable, day) pairs ($1, $2)
// by the first and last of them ($3, $4: timeBounds). Without it each such statement
// planned and scanned every chunk of values_packed and "values": with two years of
// weekly chunks, 25 ms planned and 11 ms run for one day where it now takes 3.6 and
// 0.9 (EXPLAIN ANALYZE).
const daysBetween = `p.day >= $3::timestamptz AND p.day <= $4::timestamptz`

// timeBounds are the first and last of times (none: zero times, which bound nothing).
func timeBounds(times []time.Time) (first, last time.Time) {
	if len(times) == 0 {
		return first, last
	}
	first, last = times[0], times[0]
	for _, d := range times[1:] {
		if d.Before(first) {
			first = d
		}
		if d.After(last) {
			last = d
		}
	}
	return first, last
}

// unpackDays moves those of the (variable, day) pairs that are packed back into rows.
func unpackDays(ctx context.Context, exec Exec, vars []int64, days []time.Time) error {
	first, last := timeBounds(days)
	for _, q := range unpackSQL {
		if err := exec(ctx, q, vars, days, first, last); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
	}
	return nil
}

// clearPacked prepares a variable's values in [from, to] (ms, inclusive) for a writer
// that deletes and rewrites them as rows: the packed days inside the range are deleted
// and the (at most two) packed days it cuts are unpacked, in the caller's transaction
// (ReplaceRange, Store.Delete). The caller holds the variable's row
// lock.
func clearPacked(ctx context.Context, exec Exec, key, from, to int64) error {
	start, end := time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	if err := exec(ctx, `DELETE FROM values_packed
		WHERE variable_id = $1 AND day >= $2 AND day + INTERVAL '1 day' - INTERVAL '1 microsecond' <= $3`,
		key, start, end); err != nil {
		return fmt.Errorf("delete packed days: %w", err)
	}
	return unpackDays(ctx, exec, []int64{key, key}, []time.Time{Day(start), Day(end)})
}

// clearPackedRanges is clearPacked of many (variable, [from, to]) ranges at once, four
// statements whatever their number (Replace). A variable's
// ranges must not overlap.
func clearPackedRanges(ctx context.Context, exec Exec, keys, froms, tos []int64) error {
	if len(keys) == 0 {
		return nil
	}
	starts, ends := make([]time.Time, len(keys)), make([]time.Time, len(keys))
	vars, days := make([]int64, 0, 2*len(keys)), make([]time.Time, 0, 2*len(keys))
	for i, k := range keys {
		starts[i], ends[i] = time.UnixMilli(froms[i]).UTC(), time.UnixMilli(tos[i]).UTC()
		vars, days = append(vars, k, k), append(days, Day(starts[i]), Day(ends[i]))
	}
	if err := exec(ctx, `DELETE FROM values_packed p USING unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
		WHERE p.variable_id = w.variable_id AND p.day >= w.lo AND p.day + INTERVAL '1 day' - INTERVAL '1 microsecond' <= w.hi`,
		keys, starts, ends); err != nil {
		return fmt.Errorf("delete packed days: %w", err)
	}
	return unpackDays(ctx, exec, vars, days)
}

// lockVariablesSQL takes the variables' rows in key order (after their devices').
const lockVariablesSQL = `SELECT FROM variables WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`

// packedAmongSQL lists which of the (variable, day) pairs are packed.
const packedAmongSQL = `SELECT p.variable_id, p.day FROM values_packed p
JOIN (SELECT DISTINCT * FROM unnest($1::bigint[], $2::timestamptz[])) AS w(variable_id, day)
  ON p.variable_id = w.variable_id AND p.day = w.day
WHERE ` + daysBetween

// unpackOld unpacks the packed days that rows older than PackedAge fall in, before a
// write adds to them: under the rows' devices' and variables' locks (in the writers'
// lock order), so that no packer packs a day between this look and the write. Rows
// newer than PackedAge cannot touch a packed day and cost nothing here. Old rows cost
// one round trip per batch: the locks and one probe of the batch's (variable, day)
// pairs; the unpack statements run only for the days found packed (rare: late data a
// few days old, not a bulk load of history).
func unpackOld(ctx context.Context, tx pgx.Tx, rows []Row, t Targets) error {
	vars, days := oldDays(rows, time.Now().Add(-PackedAge).UnixMilli())
	if len(vars) == 0 {
		return nil
	}
	devIDs, _ := sortedDevices(slices.Clone(t.Devices)) // it compacts in place: writeRows reads t after
	_, _, err := lockAndUnpackDays(ctx, tx, devIDs, vars, vars, days)
	return err
}

// lockAndUnpackDays takes the devices' and variables' rows in the writers' lock order
// (devices, then variables, by key), then unpacks those of the (variable, day) pairs
// that are packed: a write into a packed day goes to rows, as every other write. It
// returns the pairs it unpacked.
func lockAndUnpackDays(ctx context.Context, tx pgx.Tx, devIDs, lockVars, vars []int64, days []time.Time) ([]int64, []time.Time, error) {
	var packedVars []int64
	var packedDays []time.Time
	b := &pgx.Batch{}
	b.Queue(lockDevicesSQL, devIDs)
	b.Queue(lockVariablesSQL, lockVars)
	first, last := timeBounds(days)
	b.Queue(packedAmongSQL, vars, days, first, last).Query(func(rows pgx.Rows) error {
		var v int64
		var d time.Time
		_, err := pgx.ForEachRow(rows, []any{&v, &d}, func() error {
			packedVars, packedDays = append(packedVars, v), append(packedDays, d)
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("lock the targets and look for packed days: %w", err)
	}
	if len(packedVars) == 0 {
		return nil, nil, nil
	}
	if err := unpackDays(ctx, execIn(tx), packedVars, packedDays); err != nil {
		return nil, nil, fmt.Errorf("before writing: %w", err)
	}
	return packedVars, packedDays, nil
}

// oldDays are the distinct (variable, UTC day) pairs of the rows (sorted by (variable,
// ts)) older than cutoff (ms).
func oldDays(rows []Row, cutoff int64) ([]int64, []time.Time) {
	const dayMs = int64(24 * time.Hour / time.Millisecond)
	var vars, starts []int64
	for _, r := range rows {
		if r.TS >= cutoff {
			continue
		}
		d := r.TS - ((r.TS%dayMs)+dayMs)%dayMs // floor, also before 1970
		if n := len(vars); n > 0 && vars[n-1] == r.Variable && starts[n-1] == d {
			continue
		}
		vars, starts = append(vars, r.Variable), append(starts, d)
	}
	return vars, millisToTimes(starts)
}

// restoreMinutesSQL gives the packed days in [$1, $2) their minute tiles back, from
// their dots: retention runs it before it drops packed chunks, since past the raw
// horizon the tiers alone answer, minutes included (API.md §16).
var restoreMinutesSQL = `INSERT INTO ` + tiers.All[0].Table + ` (` + tileColumns + `)
SELECT t.* FROM values_packed p
CROSS JOIN LATERAL (` + rawTileSQL(interval(tiers.All[0]),
	`packed_values(ARRAY[p.variable_id], p.day, p.day + INTERVAL '1 day' - INTERVAL '1 microsecond') x`, `true`) + `) t
WHERE p.day >= $1 AND p.day < $2`

// RestoreMinuteTiles gives the packed days in [from, to) their minute tiles back, in
// the caller's transaction (see restoreMinutesSQL).
func RestoreMinuteTiles(ctx context.Context, tx pgx.Tx, from, to time.Time) error {
	if _, err := tx.Exec(ctx, restoreMinutesSQL, from, to); err != nil {
		return fmt.Errorf("restore minute tiles of packed days: %w", err)
	}
	return nil
}
