package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRetentionRun: `sensorapi retention run` through the real binary drops the chunks
// of raw values past the retention, prints them with the rows and the horizon, and
// exits 1 without doing anything while another instance holds the lock; `serve` with
// the same setting runs the job at start and shows the horizon in /metrics.
func TestRetentionRun(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	// three weeks in 1990, long before anything the other tests write
	t0 := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	var points []testenv.Point
	for ts := t0; ts.Before(t0.Add(21 * 24 * time.Hour)); ts = ts.Add(time.Hour) {
		points = append(points, testenv.Point{TS: ts.UnixMilli(), Value: 1})
	}
	s := env.Seed(t, env.AdminToken, "retention-cli", "v", points)
	var cut time.Time // the end of the second chunk holding them
	if err := env.DB.NewRaw(`SELECT range_end FROM timescaledb_information.chunks
		WHERE hypertable_name = 'values' AND range_end > ? ORDER BY range_end OFFSET 1 LIMIT 1`, t0).Scan(ctx, &cut); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := env.DB.NewRaw(`SELECT count(*) FROM "values" WHERE variable_id = ? AND ts < ?`, s.VariableKey, cut).
		Scan(ctx, &before); err != nil || before == 0 {
		t.Fatalf("%d values before %s (%v)", before, cut, err)
	}
	minutes := func() (n int64) {
		if err := env.DB.NewRaw(`SELECT count(*) FROM value_minutes WHERE variable_id = ? AND tile < ?`, s.VariableKey, cut).
			Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := minutes(); n != before {
		t.Fatalf("%d minute rollups before %s, want %d", n, cut, before)
	}
	// whole days back to the cut: the cutoff falls less than a day after it, long
	// before the end of the next chunk
	days := int(time.Since(cut) / (24 * time.Hour))
	raw := "SENSORAPI_RETENTION_RAW=" + fmt.Sprint(days) + "d"
	run := func() (string, error) {
		cmd := exec.Command(bin, "retention", "run")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN, raw)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	held, err := env.DB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `SELECT pg_advisory_lock($1)`, retention.LockKey); err != nil {
		t.Fatal(err)
	}
	out, err := run()
	if _, uerr := held.Exec(ctx, `SELECT pg_advisory_unlock($1)`, retention.LockKey); uerr != nil {
		t.Fatal(uerr)
	}
	held.Release()
	if err == nil || !strings.Contains(out, "another instance") {
		t.Fatalf("retention run while the lock is held: %v\n%s", err, out)
	}

	// other tests of this package may have written before 1990 too: their chunks go as well
	var chunks, rows int64
	if err := env.DB.NewRaw(`SELECT (SELECT count(*) FROM timescaledb_information.chunks
		WHERE hypertable_name = 'values' AND range_end <= ?), (SELECT count(*) FROM "values" WHERE ts < ?)`, cut, cut).
		Scan(ctx, &chunks, &rows); err != nil || chunks < 2 || rows < before {
		t.Fatalf("%d chunks and %d rows before %s (%v)", chunks, rows, cut, err)
	}
	out, err = run()
	if err != nil {
		t.Fatalf("retention run: %v\n%s", err, out)
	}
	t.Logf("retention run:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("dropped %d chunks, %d rows", chunks, rows),
		fmt.Sprintf("raw horizon: %s (%d ms)", cut.UTC().Format(time.RFC3339), cut.UnixMilli()),
		"rollups: kept forever",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("retention run printed no %q", want)
		}
	}
	var left int64
	if err := env.DB.NewRaw(`SELECT count(*) FROM "values" WHERE variable_id = ? AND ts < ?`, s.VariableKey, cut).
		Scan(ctx, &left); err != nil || left != 0 {
		t.Fatalf("%d values left before the horizon (%v)", left, err)
	}

	// the minutes before the horizon stay, even through a rollups rebuild
	rebuild := exec.Command(bin, "rollups", "rebuild", "--since", "1980-01-01T00:00:00Z")
	rebuild.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
	if out, err := rebuild.CombinedOutput(); err != nil || !strings.Contains(string(out), "from the raw horizon") {
		t.Fatalf("rollups rebuild: %v\n%s", err, out)
	}
	if n := minutes(); n != before {
		t.Fatalf("%d minute rollups before the horizon after retention and a rebuild, want %d", n, before)
	}

	// serve with the same setting: the job runs at start, and /metrics shows it
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN, "SENSORAPI_ADDR="+addr, "SENSORAPI_MQTT_ADDR=", raw,
		"SENSORAPI_ADMIN_TOKEN=retention-serve-admin-token-0123456789")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve logs:\n%s", logs.String())
		}
	})
	waitReady(t, "http://"+addr)
	for deadline := time.Now().Add(testenv.Patience); ; time.Sleep(100 * time.Millisecond) {
		status, body := httpDo(t, "http://"+addr, "GET", "/metrics", "", "")
		var h float64
		for _, l := range strings.Split(body, "\n") {
			_, _ = fmt.Sscanf(l, "sensorapi_retention_raw_horizon_seconds %g", &h)
		}
		if status == 200 && strings.Contains(body, `sensorapi_retention_runs_total{result="ran"} 1`) && h == float64(cut.Unix()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no retention run with the horizon %d in /metrics:\n%s", cut.Unix(), grepLines(body, "sensorapi_retention"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
