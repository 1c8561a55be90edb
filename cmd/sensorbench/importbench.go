package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
)

// benchImport measures the history import (issue 43) of rows of one variable from a
// CSV file through HTTP, next to the database's own path in the same run (the floor):
// COPY of the same CSV into an unlogged staging table, then one INSERT … SELECT … ON
// CONFLICT (variable_id, ts) DO UPDATE into a plain hypertable with the same unique
// index as "values" — no tiles, last values or packed days — into an empty period and
// again over the same timestamps. The server's peak RSS is sampled during the imports.
func benchImport(ctx context.Context, h *benchharness.Harness, rows int) error {
	dir, err := os.MkdirTemp("", "sensorbench-import-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "history.csv")
	size, err := writeHistory(file, rows)
	if err != nil {
		return err
	}
	_, tok, err := h.NewAccount(ctx, "import")
	if err != nil {
		return err
	}
	// the machine may be shared: floor and service alternate, and each keeps its best;
	// each imports the file into an empty period, then again over the values it holds
	// (every row an update: the upsert path)
	var floor, viaHTTP [2]time.Duration
	var peak float64
	for round := range importRounds {
		f, err := importFloor(ctx, h, file)
		if err != nil {
			return fmt.Errorf("import floor: %w", err)
		}
		rss := h.SampleRSS()
		var d [2]time.Duration
		for i := range d {
			if d[i], err = importHTTP(ctx, h.URL, tok, file, round); err != nil {
				break
			}
		}
		peak = max(peak, rss.Stop())
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		for i := range d {
			if round == 0 || f[i] < floor[i] {
				floor[i] = f[i]
			}
			if round == 0 || d[i] < viaHTTP[i] {
				viaHTTP[i] = d[i]
			}
		}
	}
	n := float64(rows)
	fmt.Printf("history import: %d rows of one variable, CSV %.0f MiB, best of %d alternating rounds\n",
		rows, float64(size)/(1<<20), importRounds)
	for i, into := range []string{"an empty period", "a period holding the same timestamps (every row replaces one)"} {
		fmt.Printf("  into %s:\n", into)
		fmt.Printf("    floor (COPY CSV → unlogged table, INSERT … ON CONFLICT into a plain hypertable) %8.0f rows/s  %6.1f s\n",
			n/floor[i].Seconds(), floor[i].Seconds())
		fmt.Printf("    HTTP  (POST …/values/import, tiles and last value kept)                         %8.0f rows/s  %6.1f s   %.2f × floor (target ≥ 0.8)\n",
			n/viaHTTP[i].Seconds(), viaHTTP[i].Seconds(), floor[i].Seconds()/viaHTTP[i].Seconds())
	}
	fmt.Printf("  server peak RSS %.0f MiB (target < 256 MiB)\n\n", peak)
	return nil
}

// importRounds is how many times each side runs (each import into a new variable).
const importRounds = 2

// writeHistory writes rows of one variable at 1 s, as an export writes them
// (timestamp,value), and returns the file's size.
func writeHistory(path string, rows int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.WriteString("timestamp,value\n")
	rng := rand.New(rand.NewPCG(43, 43))
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	buf := make([]byte, 0, 64)
	v := 20.0
	for i := range rows {
		v += rng.NormFloat64() * 0.1
		buf = strconv.AppendInt(buf[:0], start+int64(i)*1000, 10)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, v, 'g', -1, 64)
		buf = append(buf, '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// floorSQL prepares the floor's hypertable: the columns and unique index of "values".
var floorSQL = []string{
	`DROP TABLE IF EXISTS floor_values`,
	`CREATE TABLE floor_values (variable_id bigint NOT NULL, ts timestamptz NOT NULL, value float8 NOT NULL,
		context jsonb, created_at timestamptz NOT NULL DEFAULT now())`,
	`SELECT create_hypertable('floor_values', by_range('ts', INTERVAL '7 days'), create_default_indexes => false)`,
	`CREATE UNIQUE INDEX ON floor_values (variable_id, ts DESC)`,
}

// importFloor runs the floor twice on one table set up beforehand, into the empty
// table and then again over the rows it wrote, and returns both times.
func importFloor(ctx context.Context, h *benchharness.Harness, file string) (times [2]time.Duration, err error) {
	for _, q := range floorSQL {
		if _, err := h.DB.Pool.Exec(ctx, q); err != nil {
			return times, err
		}
	}
	defer func() { _, _ = h.DB.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS floor_values`) }()
	for i := range times {
		if times[i], err = importFloorOnce(ctx, h, file); err != nil {
			return times, err
		}
	}
	return times, nil
}

// importFloorOnce copies the file into a staging table and upserts it, in one
// transaction, and returns its time.
func importFloorOnce(ctx context.Context, h *benchharness.Harness, file string) (time.Duration, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	start := time.Now()
	err = pgx.BeginFunc(ctx, h.DB.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE UNLOGGED TABLE floor_stage (ts bigint, value float8)`); err != nil {
			return err
		}
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, f, `COPY floor_stage FROM STDIN (FORMAT csv, HEADER true)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO floor_values (variable_id, ts, value)
			SELECT 1, 'epoch'::timestamptz + ts * INTERVAL '1 millisecond', value FROM floor_stage
			ON CONFLICT (variable_id, ts) DO UPDATE SET value = EXCLUDED.value, context = EXCLUDED.context, created_at = now()`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DROP TABLE floor_stage`)
		return err
	})
	return time.Since(start), err
}

// importHTTP uploads the file to the import route of the variable t<round> (created by
// the first upload of the round).
func importHTTP(ctx context.Context, base, token, file string, round int) (time.Duration, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1.6/devices/history/t%d/values/import", base, round), f)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("Content-Type", "text/csv")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %s", resp.Status)
	}
	return time.Since(start), nil
}
