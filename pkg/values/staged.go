package values

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// A history import (pkg/importer) brings millions of rows in one request. They are
// copied (binary COPY) into a staging table of the import's own, then written into the
// store by one INSERT … SELECT … ON CONFLICT, and the packed days, last values and
// rollup tiles are kept as Write keeps them for a batch, from a tally of the rows taken
// while they streamed by: nothing of the rows is held in memory.

// StagedRow is one row of an import: its line in the file (a later line wins a
// (variable, timestamp)), its slot (the index of its variable in the import's keys)
// and the dot. Row.Variable is not read.
type StagedRow struct {
	Line int64
	Slot int
	Row
}

// RowSource yields an import's rows, as pgx.CopyFromSource does; Err, once Next
// returned false, tells whether the rows ended well (a bad line fails the COPY).
type RowSource interface {
	Next() bool
	Row() StagedRow
	Err() error
}

// Staging is an import's staging table, in the import's transaction: an unlogged
// table (no WAL for rows that are copied once more) created and dropped by it, so a
// rolled-back import leaves none. Its tiler (nil: none) builds the minute tiles beside
// the upsert (tiler.go). Close it when done.
type Staging struct {
	table   string
	tally   *tally
	rows    int64
	tiler   *tiler
	tiled   bool          // the minute tiles came from the tiler
	closing chan struct{} // closed once the tiler is released (tilerMinutes)
}

// Stage creates the staging table in tx and copies the source's rows into it, and,
// past maxTilePoints rows, into a tiler on a second connection of the store's pool
// when one is free.
func (s *Store) Stage(ctx context.Context, tx pgx.Tx, src RowSource) (*Staging, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	st := &Staging{table: "import_" + hex.EncodeToString(b), tally: newTally()}
	if _, err := tx.Exec(ctx, `CREATE UNLOGGED TABLE `+st.table+` (line bigint NOT NULL, slot int NOT NULL,
		ts timestamptz NOT NULL, value float8 NOT NULL, context jsonb) WITH (autovacuum_enabled = false)`); err != nil {
		return nil, fmt.Errorf("create the staging table: %w", err)
	}
	st.tiler = newTiler(s.Pool)
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, stagedRows(ctx, src, st.tally, st.tiler),
		`COPY `+st.table+` (line, slot, ts, value, context) FROM STDIN (FORMAT binary)`)
	if st.tiler != nil && !st.tiler.endFeed(err) {
		st.Close()
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("copy rows: %w", err)
	}
	st.rows = tag.RowsAffected()
	return st, nil
}

// Close releases the tiler's connection, if the staging still holds one, or waits
// for the release tilerMinutes began.
func (s *Staging) Close() {
	s.tiler.close()
	s.tiler = nil
	if s.closing != nil {
		<-s.closing
		s.closing = nil
	}
}

// stagedRows is the binary COPY stream of the source's rows (copyrows.go), each
// tallied and fed to the tiler (nil: none) on its way.
func stagedRows(ctx context.Context, src RowSource, tally *tally, t *tiler) *copyRows {
	return newCopyRows(func(b []byte) ([]byte, bool, error) {
		if !src.Next() {
			return b, false, src.Err()
		}
		r := src.Row()
		tally.add(r)
		if t != nil {
			t.add(ctx, r)
		}
		b = appendFields(b, 5)
		b = appendInt8(b, r.Line)
		b = appendInt4(b, int32(r.Slot))
		b = appendTimestamptz(b, r.TS)
		b = appendFloat8(b, r.Value)
		return appendJSONB(b, r.Context), true, nil
	})
}

// Span is what a write did to one variable: values with timestamps in [From, To] (ms).
type Span struct {
	Variable, From, To int64
}

// StagedWritten is what Staging.Write did, for after the commit.
type StagedWritten struct {
	Rows  int64    // rows staged (a timestamp twice counts twice)
	Spans []Span   // one per variable written
	Moved []string // last-value notifications (NotifyLastValues, once committed)
}

// Write writes the staged rows of slot i to the variable keys[i] (last line wins a
// (variable, timestamp)), in the caller's transaction, with the effects of Write: the
// packed days they fall in are unpacked first, then the values are upserted, the
// lastValue/lastActivity of the targets moved and the tiles recomputed over what
// changed. It drops the staging table. keys must be distinct.
func (s *Staging) Write(ctx context.Context, tx pgx.Tx, keys []int64, t Targets) (StagedWritten, error) {
	var w StagedWritten
	if len(keys) < len(s.tally.slots) {
		return w, fmt.Errorf("write staged rows: %d slots, %d keys", len(s.tally.slots), len(keys))
	}
	unpackedVars, unpackedDays, err := s.lockAndUnpack(ctx, tx, keys, t)
	if err != nil {
		return w, err
	}
	s.startTiles(ctx, keys, unpackedVars, unpackedDays)
	if err := s.insert(ctx, tx, keys); err != nil {
		return w, err
	}
	marks, moved, err := s.lastValues(ctx, tx, keys, t)
	if err != nil {
		return w, err
	}
	if err := s.retile(ctx, tx, keys, marks); err != nil {
		return w, err
	}
	if _, err := tx.Exec(ctx, `DROP TABLE `+s.table); err != nil {
		return w, fmt.Errorf("drop the staging table: %w", err)
	}
	for i, st := range s.tally.slots {
		if st.n > 0 {
			w.Spans = append(w.Spans, Span{Variable: keys[i], From: st.from, To: st.to})
		}
	}
	w.Rows, w.Moved = s.rows, moved
	return w, nil
}

// keysFrom is the FROM item mapping slots to keys ($1) as k(id, slot).
const keysFrom = `unnest($1::bigint[]) WITH ORDINALITY AS k(id, slot)`

// storedInSpansSQL counts the variables ($1) holding a row in their span ($2, $3).
const storedInSpansSQL = `SELECT count(*) FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(id, lo, hi)
WHERE EXISTS (SELECT FROM "values" v WHERE v.variable_id = w.id AND v.ts BETWEEN w.lo AND w.hi)`

// insert writes the staged rows with one statement. When no variable holds a row in
// its span (history into an empty period: the usual import) and no timestamp repeats,
// it is a plain INSERT, as Write's fast path and for the same reason (about twice as
// fast as ON CONFLICT on a hypertable), under a savepoint: a row a concurrent writer
// added meanwhile fails it with a unique violation, and the upsert runs instead.
func (s *Staging) insert(ctx context.Context, tx pgx.Tx, keys []int64) error {
	var ids []int64
	var los, his []time.Time
	for i, st := range s.tally.slots {
		if st.n > 0 {
			ids, los, his = append(ids, keys[i]), append(los, time.UnixMilli(st.from).UTC()), append(his, time.UnixMilli(st.to).UTC())
		}
	}
	var stored int
	if err := tx.QueryRow(ctx, storedInSpansSQL, ids, los, his).Scan(&stored); err != nil {
		return fmt.Errorf("look for stored values: %w", err)
	}
	if stored == 0 && s.tally.oneWay() {
		err := sendBatch(ctx, tx, []*pgx.QueuedQuery{{SQL: "SAVEPOINT fast_import"},
			{SQL: s.insertSQL(len(keys), false), Arguments: []any{keys}}})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" {
			return wrapErr("write values", err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT fast_import"); err != nil {
			return fmt.Errorf("write values: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, s.insertSQL(len(keys), true), keys); err != nil {
		return fmt.Errorf("write values: %w", err)
	}
	return nil
}

// wrapErr wraps err (nil: nil) with what failed.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// insertSQL is the one statement that writes the staged rows: an upsert, or a plain
// INSERT (see insert). Rows of a slot whose timestamps ran one way cannot share one;
// otherwise the last line of each (slot, ts) is kept (ON CONFLICT may not meet one row
// twice).
func (s *Staging) insertSQL(slots int, upsert bool) string {
	key, from := `($1::bigint[])[1]`, s.table+` s`
	if slots > 1 {
		key, from = `k.id`, s.table+` s JOIN `+keysFrom+` ON k.slot = s.slot + 1`
	}
	sel := `SELECT ` + key + `, s.ts, s.value, s.context FROM ` + from
	if !s.tally.oneWay() {
		sel = `SELECT DISTINCT ON (s.slot, s.ts) ` + key + `, s.ts, s.value, s.context FROM ` + from +
			` ORDER BY s.slot, s.ts, s.line DESC`
	}
	stmt := `INSERT INTO "values" (variable_id, ts, value, context)
` + sel
	if upsert {
		stmt += `
ON CONFLICT (variable_id, ts) DO UPDATE
SET value = EXCLUDED.value, context = EXCLUDED.context, created_at = now()`
	}
	return stmt
}

// lockAndUnpack takes the targets' rows in the writers' lock order (devices, then
// variables, by key) and unpacks the packed days the rows fall in, as unpackOld does;
// it returns the (variable, day) pairs it unpacked.
func (s *Staging) lockAndUnpack(ctx context.Context, tx pgx.Tx, keys []int64, t Targets) ([]int64, []time.Time, error) {
	devIDs, _ := sortedDevices(slices.Clone(t.Devices))
	vars, days := s.tally.oldDays(keys)
	return lockAndUnpackDays(ctx, tx, devIDs, keys, vars, days)
}

// lastValues moves lastActivity of the devices and lastValue/lastActivity of the
// variables to each one's newest staged row (lastValueSQL), and returns the variables'
// rollup marks and the notifications of the last values that moved.
func (s *Staging) lastValues(ctx context.Context, tx pgx.Tx, keys []int64, t Targets) (map[int64]int64, []string, error) {
	var lv lastValues
	for i, st := range s.tally.slots {
		if st.n == 0 {
			continue
		}
		lv.vars, lv.labels = append(lv.vars, keys[i]), append(lv.labels, t.Variables[keys[i]])
		lv.ts, lv.vals = append(lv.ts, time.UnixMilli(st.last.TS).UTC()), append(lv.vals, st.last.Value)
		var c *string
		if st.last.Context != nil {
			str := string(st.last.Context)
			c = &str
		}
		lv.ctxs = append(lv.ctxs, c)
	}
	devIDs, devLabels := sortedDevices(t.Devices)
	var devicesSeen int64
	var moved []string
	var marks map[int64]int64
	b := &pgx.Batch{}
	b.Queue(lastActivitySQL, devIDs, devLabels).Exec(func(ct pgconn.CommandTag) error {
		devicesSeen = ct.RowsAffected()
		return nil
	})
	b.Queue(lastValueSQL, lv.vars, lv.labels, lv.ts, lv.vals, lv.ctxs).Query(func(rows pgx.Rows) error {
		var err error
		moved, marks, err = movedPayloads(rows)
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("write last values: %w", err)
	}
	if devicesSeen != int64(len(devIDs)) || len(marks) != len(lv.vars) {
		return nil, nil, ErrStale
	}
	return marks, moved, nil
}

// retile recomputes the tiles over what the import wrote: tile by tile (those holding
// a staged row, found in the staging table) for the variables of at most maxTilePoints
// rows, over their whole span (from "values", or the tiler's minutes) for the others.
func (s *Staging) retile(ctx context.Context, tx pgx.Tx, keys []int64, marks map[int64]int64) error {
	var bigK, bigLo, bigHi []int64
	smallKeys := make([]int64, len(keys)) // by slot; 0 for the slots retiled over their span
	small := false
	for i, st := range s.tally.slots {
		switch {
		case st.n == 0:
		case st.n > maxTilePoints:
			bigK, bigLo, bigHi = append(bigK, keys[i]), append(bigLo, st.from), append(bigHi, min(st.to, marks[keys[i]]-1))
		default:
			smallKeys[i], small = keys[i], true
		}
	}
	first, err := s.tilerMinutes(ctx, tx, bigK, bigLo, bigHi)
	if err != nil {
		return err
	}
	if err := retileRanges(ctx, execIn(tx), first, bigK, bigLo, bigHi); err != nil {
		return err
	}
	for _, t := range tiers.All[1:] { // a coarser tile holding the mark: CatchUp's to build
		if _, err := tx.Exec(ctx, `DELETE FROM `+t.Table+` m USING variables v
WHERE m.variable_id = ANY($1) AND v.id = m.variable_id AND m.tile > v.rollups_until - INTERVAL '`+interval(t)+`'
  AND m.tile + INTERVAL '`+interval(t)+`' > v.rollups_until`, bigK); err != nil {
			return fmt.Errorf("retile %s: %w", t.Table, err)
		}
	}
	if !small {
		return nil
	}
	for i, t := range tiers.All {
		wanted := `(SELECT k.id, time_bucket(INTERVAL '` + interval(t) + `', s.ts) FROM ` + s.table + ` s JOIN ` + keysFrom +
			` ON k.slot = s.slot + 1 WHERE k.id <> 0)`
		if _, err := tx.Exec(ctx, recomputeTilesFrom(i, wanted, "", ""), smallKeys); err != nil {
			return fmt.Errorf("recompute %s: %w", t.Table, err)
		}
	}
	return nil
}

// startTiles has the tiler build the minute tiles of the variables retiled over their
// span (more than maxTilePoints rows), now that the import holds their row locks and
// has unpacked the (variable, day) pairs given (the tiler reads those days' dots
// packed, as they were: a packed day the import left alone has no minute tiles); with
// none, the tiler is closed.
func (s *Staging) startTiles(ctx context.Context, keys, unpackedVars []int64, unpackedDays []time.Time) {
	if s.tiler == nil {
		return
	}
	minute := tiers.All[0]
	var jobs []tileJob
	for i, st := range s.tally.slots {
		if st.n > maxTilePoints {
			j := tileJob{key: keys[i], slot: int32(i), dedup: !s.tally.oneWay(),
				lo: time.UnixMilli(minute.Floor(st.from)).UTC(), hi: time.UnixMilli(minute.Floor(st.to) + minute.WidthMs()).UTC()}
			for k, v := range unpackedVars {
				if v == j.key {
					j.unpacked = append(j.unpacked, unpackedDays[k])
				}
			}
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		s.Close()
		return
	}
	s.tiler.build(ctx, jobs)
}

// tilerMinutes puts the tiler's minute tiles over the ranges (a variable's [from, to],
// ms, as retileRanges takes them) into tx, and returns the first tier left to retile:
// 1, or 0 when there is no tiler or it failed.
func (s *Staging) tilerMinutes(ctx context.Context, tx pgx.Tx, keys, froms, tos []int64) (int, error) {
	if s.tiler == nil || len(keys) == 0 {
		return 0, nil
	}
	defer func() { // its rollback (the staged rows' files go) overlaps the coarser tiers
		t, done := s.tiler, make(chan struct{})
		s.tiler, s.closing = nil, done
		go func() {
			defer close(done)
			t.close()
		}()
	}()
	minute := tiers.All[0]
	var ks []int64
	var los, his []time.Time
	for j, k := range keys {
		from, to := max(froms[j], 0), min(tos[j], MaxTimestamp)
		if from <= to {
			ks = append(ks, k)
			los, his = append(los, time.UnixMilli(minute.Floor(from)).UTC()), append(his, time.UnixMilli(minute.Floor(to)+minute.WidthMs()).UTC())
		}
	}
	err := s.tiler.moveInto(ctx, tx, ks, los, his)
	switch {
	case errors.Is(err, errTilerFailed):
		slog.Warn("history import: the tiler failed; the import tiles in its own transaction", "err", err)
		return 0, nil
	case err != nil:
		return 0, err
	}
	s.tiled = true
	return 1, nil
}
