package values

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// A history import's upsert and the minute tiles over its span each take seconds per
// million rows (1 M rows over stored values: ~5.4 s and ~2.1 s), one after the other
// in the import's transaction. The tiler builds those tiles on a second connection while
// the upsert runs: it gets a copy of the staged rows as they stream in, and once the
// import holds its variables' row locks (which every writer of a variable's values
// takes first) it computes the tiles from them and from the stored values they do not
// replace, read as they were before the import — what the upsert leaves. The tiles then
// go into the import's transaction by binary COPY through a pipe (none is held in
// memory), bit for bit what rawTileSQL over "values" gives. Whatever fails on the
// tiler's side leaves the tiles to the import's transaction, as before.

// tilerRow is a staged row as the tiler keeps it (contexts do not make tiles).
type tilerRow struct {
	line  int64
	slot  int32
	ts    int64 // ms
	value float64
}

// tilerBatch is how many rows go to the tiler's COPY at once.
const tilerBatch = 4096

// tilerAcquireWait bounds the wait for the tiler's connection: an import already holds
// one, and imports waiting on one another's second connection must not stall the pool.
const tilerAcquireWait = time.Second

// tilerLockWait bounds the tiler's waits for a lock. The import waits for the tiler in
// Go, where PostgreSQL's deadlock detector cannot see it: should the tiler queue behind
// a lock that waits for the import (say, retention dropping a chunk the import writes
// to), it gives up, and the import tiles itself.
const tilerLockWait = "2s"

// tiler is the second connection of one import, in a transaction of its own that
// holds its temporary tables (tiler_rows, tiler_tiles) and ends in a rollback. It
// starts once the import has passed maxTilePoints rows (a smaller import has no
// variable to tile over its span, and should not pay for a connection and two tables),
// with the rows held until then.
type tiler struct {
	pool    *pgxpool.Pool
	started bool // the connection is open and its COPY running
	gaveUp  bool // it could not start: the import tiles itself

	conn *pgxpool.Conn
	tx   pgx.Tx

	feed    chan []tilerRow // batches to the COPY; closed at the source's end
	buf     []tilerRow
	fed     bool          // feed closed
	srcErr  error         // how the source ended; set before feed is closed
	copied  chan struct{} // closed when the COPY has ended
	copyErr error         // set before copied is closed

	built chan error // the tile statements' end, once started
}

// newTiler is an import's tiler on pool (nil: none).
func newTiler(pool *pgxpool.Pool) *tiler {
	if pool == nil {
		return nil
	}
	return &tiler{pool: pool}
}

// start opens the tiler's connection, its transaction and tables and its COPY, and
// tells whether it could: not when no connection is free soon.
func (t *tiler) start(ctx context.Context) bool {
	if st := t.pool.Stat(); st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, tilerAcquireWait)
	defer cancel()
	conn, err := t.pool.Acquire(actx)
	if err != nil {
		return false
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = '`+tilerLockWait+`';
CREATE TEMPORARY TABLE tiler_rows (line bigint NOT NULL, slot int NOT NULL, ts timestamptz NOT NULL, value float8 NOT NULL);
CREATE TEMPORARY TABLE tiler_tiles (LIKE `+tiers.All[0].Table+`)`)
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		conn.Release()
		return false
	}
	t.conn, t.tx, t.started = conn, tx, true
	t.feed, t.copied = make(chan []tilerRow, 4), make(chan struct{})
	go t.copy(ctx)
	return true
}

// copy runs the tiler's COPY of the rows fed to it.
func (t *tiler) copy(ctx context.Context) {
	defer close(t.copied)
	_, t.copyErr = t.tx.Conn().PgConn().CopyFrom(ctx, t.feedRows(), `COPY tiler_rows (line, slot, ts, value) FROM STDIN (FORMAT binary)`)
}

// add feeds one staged row to the tiler, starting it past maxTilePoints rows.
func (t *tiler) add(ctx context.Context, r StagedRow) {
	if t.gaveUp {
		return
	}
	t.buf = append(t.buf, tilerRow{line: r.Line, slot: int32(r.Slot), ts: r.TS, value: r.Value})
	if !t.started {
		if len(t.buf) <= maxTilePoints {
			return
		}
		if !t.start(ctx) {
			t.gaveUp, t.buf = true, nil
			return
		}
	}
	if len(t.buf) >= tilerBatch {
		t.send()
	}
}

// send hands the buffered rows to the COPY, unless it has ended (failed).
func (t *tiler) send() {
	if len(t.buf) == 0 {
		return
	}
	select {
	case t.feed <- t.buf:
	case <-t.copied:
	}
	t.buf = make([]tilerRow, 0, tilerBatch)
}

// endFeed ends the rows (err: the source failed, and so does the COPY) and waits for
// the COPY; it tells whether the tiler holds every row (false also when it never
// started). It may be called again.
func (t *tiler) endFeed(err error) bool {
	if !t.started {
		return false
	}
	if !t.fed {
		t.send()
		t.srcErr, t.fed = err, true
		close(t.feed)
	}
	<-t.copied
	return t.copyErr == nil && t.srcErr == nil
}

// feedRows is the COPY stream of the rows fed (copyrows.go).
func (t *tiler) feedRows() *copyRows {
	var batch []tilerRow
	return newCopyRows(func(b []byte) ([]byte, bool, error) {
		for len(batch) == 0 {
			var ok bool
			if batch, ok = <-t.feed; !ok {
				return b, false, t.srcErr // set before the feed was closed
			}
		}
		r := batch[0]
		batch = batch[1:]
		b = appendFields(b, 4)
		b = appendInt8(b, r.line)
		b = appendInt4(b, r.slot)
		b = appendTimestamptz(b, r.ts)
		return appendFloat8(b, r.value), true, nil
	})
}

// tileJob is one variable's minute tiles for the tiler to build: over [lo, hi), from
// the staged rows of its slot (dedup: keep the last line of a timestamp), the stored
// rows and the packed dots of the days the import unpacked.
type tileJob struct {
	key      int64
	slot     int32
	lo, hi   time.Time
	dedup    bool
	unpacked []time.Time // UTC days
}

// build starts computing the jobs' tiles. The caller holds the variables' row locks:
// each statement's snapshot sees the values as the import found them.
func (t *tiler) build(ctx context.Context, jobs []tileJob) {
	t.built = make(chan error, 1)
	go func() {
		// the planner needs the staged rows' statistics to hash them for the anti-join
		// (unanalyzed, it may scan them once per stored value)
		if _, err := t.tx.Exec(ctx, `ANALYZE tiler_rows`); err != nil {
			t.built <- fmt.Errorf("tiler: %w", err)
			return
		}
		for _, j := range jobs {
			if _, err := t.tx.Exec(ctx, tilerTilesSQL(j.dedup), j.key, j.slot, j.lo, j.hi, j.unpacked); err != nil {
				t.built <- fmt.Errorf("tiler: %w", err)
				return
			}
		}
		t.built <- nil
	}()
}

// tilerTilesSQL computes into tiler_tiles the minute tiles over [$3, $4) of the variable
// $1: its staged rows (slot $2) and its rows and packed dots of the days the import
// unpacked ($5) that none of them replaces, as stored before the import (the import's
// unpack is not committed). A packed day it did not unpack keeps no minute tiles.
func tilerTilesSQL(dedup bool) string {
	staged := `SELECT $1::bigint AS variable_id, s.ts, s.value FROM tiler_rows s WHERE s.slot = $2`
	if dedup {
		staged = `SELECT DISTINCT ON (s.ts) $1::bigint AS variable_id, s.ts, s.value FROM tiler_rows s
          WHERE s.slot = $2 ORDER BY s.ts, s.line DESC`
	}
	from := `((` + staged + `)
      UNION ALL
      SELECT o.variable_id, o.ts, o.value
      FROM (SELECT variable_id, ts, value FROM "values" WHERE variable_id = $1 AND ts >= $3 AND ts < $4
            UNION ALL
            SELECT variable_id, ts, value FROM packed_values(ARRAY[$1::bigint], $3, $4)
            WHERE ts < $4 AND time_bucket(INTERVAL '1 day', ts) = ANY($5::timestamptz[])) o
      WHERE NOT EXISTS (SELECT FROM tiler_rows s WHERE s.slot = $2 AND s.ts = o.ts)) x`
	return `INSERT INTO tiler_tiles (` + tileColumns + `)
` + rawTileSQL(interval(tiers.All[0]), from, `true`)
}

// errTilerFailed: the tiler could not build its tiles; the import tiles them itself.
var errTilerFailed = errors.New("the tiler failed")

// moveInto replaces the import's minute tiles over the ranges (a variable's [lo, hi) of
// tiles, each a built job's) by the tiler's, in the import's transaction. It fails with
// errTilerFailed, having changed nothing in tx, when the tiler's side failed.
func (t *tiler) moveInto(ctx context.Context, tx pgx.Tx, keys []int64, los, his []time.Time) error {
	if t.built == nil {
		return errTilerFailed
	}
	err := <-t.built
	t.built = nil
	if err != nil {
		return errors.Join(errTilerFailed, err)
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM tiler_tiles t WHERE NOT EXISTS (
    SELECT FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS w(variable_id, lo, hi)
    WHERE t.variable_id = w.variable_id AND t.tile >= w.lo AND t.tile < w.hi)`, keys, los, his); err != nil {
		return errors.Join(errTilerFailed, err)
	}
	table := tiers.All[0].Table
	if _, err := tx.Exec(ctx, deleteRangesSQL(0), keys, los, his); err != nil {
		return fmt.Errorf("retile %s: %w", table, err)
	}
	return t.pipeTiles(ctx, tx, table)
}

// pipeTiles copies tiler_tiles into table of tx, binary, through a pipe.
func (t *tiler) pipeTiles(ctx context.Context, tx pgx.Tx, table string) error {
	r, w := io.Pipe()
	out := make(chan error, 1)
	go func() {
		_, err := t.tx.Conn().PgConn().CopyTo(ctx, w, `COPY tiler_tiles (`+tileColumns+`) TO STDOUT (FORMAT binary)`)
		_ = w.CloseWithError(err)
		out <- err
	}()
	_, err := tx.Conn().PgConn().CopyFrom(ctx, r, `COPY `+table+` (`+tileColumns+`) FROM STDIN (FORMAT binary)`)
	_ = r.CloseWithError(io.ErrClosedPipe) // the tiler's side stops writing if this side failed
	if sent := <-out; err == nil && sent != nil {
		err = sent
	}
	if err != nil {
		return fmt.Errorf("copy the tiler's tiles into %s: %w", table, err)
	}
	return nil
}

// close ends the tiler once its goroutines have: its transaction rolls back (its tables
// go) and the connection goes back to the pool (or is closed, if it is not idle).
func (t *tiler) close() {
	if t == nil || !t.started {
		return
	}
	t.endFeed(errTilerFailed)
	if t.built != nil {
		if err := <-t.built; err != nil {
			slog.Debug("history import: the tiler's tiles, unused, failed", "err", err)
		}
		t.built = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = t.tx.Rollback(ctx)
	cancel()
	t.conn.Release()
}
