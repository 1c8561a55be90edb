package values

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// exportPage is how many rows one statement of an export reads at most: each statement
// stays short (statement_timeout applies to each; 100,000 rows take ~50 ms) and the
// database never sorts more than a day of packed dots, whatever the range. Each page
// is a statement planned and started anew, which the server waits for: 20,000-row
// pages made 10 M rows 6.0–7.8 s, 100,000-row pages 5.1–5.8 s (make bench-csv). A
// variable for the tests' small pages.
var exportPage = 100_000

// ExportedDot is a dot as an export reads it: Context is nil when the dot has none.
// The bytes of Context are valid only during the call that receives the dot.
type ExportedDot struct {
	Timestamp int64 // ms
	Value     float64
	Context   []byte
	CreatedAt int64 // ms

	at time.Time // the timestamp as stored, for the next keyset page
}

// The export's statements (marked /* export */ in pg_stat_activity). A (variable, day)
// is in exactly one layout (packed.go), so the range splits into stretches: rows of
// "values" newer than the newest packed day, read in index order by keyset pages, then
// that packed day sorted, then the rows before it, and so on.
const (
	// the newest packed day of $1 holding a time in [$2, $3]
	exportPackedDaySQL = `/* export */ SELECT max(day) FROM values_packed
WHERE variable_id = $1 AND day >= time_bucket(INTERVAL '1 day', $2::timestamptz) AND day <= $3`
	// rows of $1 in [$2, $3], newest first, at most $4
	exportRowsSQL = `/* export */ SELECT ts, value, context, created_at FROM "values"
WHERE variable_id = $1 AND ts BETWEEN $2 AND $3 ORDER BY ts DESC LIMIT $4`
	// the packed dots of $1 in [$2, $3] (one day), newest first
	exportPackedSQL = `/* export */ SELECT ts, value, context, created_at
FROM packed_rows(ARRAY[$1::bigint], $2, $3) ORDER BY ts DESC`
)

// Export calls each for every dot of the variable in the range, newest first, from
// both layouts. It reads in one read-only REPEATABLE READ transaction, so that a day
// packed or unpacked meanwhile is seen once, in one layout, and statement by
// statement (exportPage rows at most), so that neither side holds more than a page:
// the caller writes each dot out as it comes. An error of each ends the export.
func (s *Store) Export(ctx context.Context, key int64, r Range, each func(ExportedDot) error) error {
	lo, cursor := r.Bounds()
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, s.Pool, opts, func(tx pgx.Tx) error {
		for !cursor.Before(lo) {
			var packed *time.Time
			if err := tx.QueryRow(ctx, exportPackedDaySQL, key, lo, cursor).Scan(&packed); err != nil {
				return fmt.Errorf("export: find packed days: %w", err)
			}
			floor := lo
			if packed != nil {
				floor = maxTime(lo, packed.Add(24*time.Hour))
			}
			if err := exportRows(ctx, tx, key, floor, cursor, each); err != nil {
				return err
			}
			if packed == nil {
				return nil
			}
			dayEnd := minTime(cursor, packed.Add(24*time.Hour-time.Microsecond))
			if err := exportQuery(ctx, tx, each, exportPackedSQL, key, maxTime(lo, *packed), dayEnd); err != nil {
				return fmt.Errorf("export: packed day %s: %w", packed.Format(time.DateOnly), err)
			}
			cursor = packed.Add(-time.Microsecond)
		}
		return nil
	})
}

// exportRows reads the rows of [lo, hi] by keyset pages of exportPage, newest first.
func exportRows(ctx context.Context, tx pgx.Tx, key int64, lo, hi time.Time, each func(ExportedDot) error) error {
	for !hi.Before(lo) {
		n, last := 0, time.Time{}
		err := exportQuery(ctx, tx, func(d ExportedDot) error {
			n++
			last = d.at
			return each(d)
		}, exportRowsSQL, key, lo, hi, exportPage)
		if err != nil {
			return fmt.Errorf("export: rows: %w", err)
		}
		if n < exportPage {
			return nil
		}
		// timestamps are unique per variable: the next page starts just before the last
		hi = last.Add(-time.Microsecond)
	}
	return nil
}

// exportQuery runs one export statement and passes each row on as it is read.
func exportQuery(ctx context.Context, tx pgx.Tx, each func(ExportedDot) error, sql string, args ...any) error {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	var created time.Time
	var d ExportedDot
	_, err = pgx.ForEachRow(rows, []any{&d.at, &d.Value, &d.Context, &created}, func() error {
		d.Timestamp, d.CreatedAt = roundMillis(d.at), roundMillis(created)
		return each(d)
	})
	return err
}

// roundMillis is t in ms rounded half up, as the JSON pages compute it in SQL.
func roundMillis(t time.Time) int64 { return t.Add(500 * time.Microsecond).UnixMilli() }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
