package testcontainers

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"
)

// startOwn starts a container for the test alone (skipped with TEST_DATABASE_URL) and
// opens its database; both are closed when the test ends.
func startOwn(t *testing.T, opts Options) (*TimescaleDB, *sql.DB) {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("starts a container of its own")
	}
	tsdb, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tsdb.Terminate(context.Background()) })
	db, err := sql.Open("pgx", tsdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return tsdb, db
}

// TestTmpfsDataDir: with TmpfsDataMB the data directory and the WAL are on a tmpfs of
// that size, PostgreSQL is not PID 1, and when it dies (as on a PANIC) the container
// stays and PostgreSQL starts again on the same data.
func TestTmpfsDataDir(t *testing.T) {
	ctx := context.Background()
	tsdb, db := startOwn(t, Options{TmpfsDataMB: 256})
	var dir, wal string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('data_directory'), current_setting('max_wal_size')").Scan(&dir, &wal); err != nil {
		t.Fatal(err)
	}
	if dir != TmpfsDir+"/data" || wal != "64MB" {
		t.Fatalf("data_directory %s, max_wal_size %s", dir, wal)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE kept AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	out, err := tsdb.Exec(ctx, `df -B1M --output=fstype,size `+TmpfsDir+` | tail -1; cat /proc/1/comm`)
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out); len(f) != 3 || f[0] != "tmpfs" || f[1] != "256" || f[2] != "bash" {
		t.Fatalf("df and PID 1: %q, want a tmpfs of 256 MiB and bash", out)
	}
	if _, err := tsdb.Exec(ctx, `kill -9 $(head -1 `+TmpfsDir+`/data/postmaster.pid)`); err != nil {
		t.Fatal(err)
	}
	// a backend may outlive its postmaster for a moment: wait for the restart in the
	// log, then ask on new connections
	db.SetMaxIdleConns(0)
	deadline := time.Now().Add(30 * time.Second)
	for restarted := false; ; time.Sleep(200 * time.Millisecond) {
		if !restarted {
			logs, err := tsdb.Logs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			restarted = strings.Contains(logs, "postgres exited with 137, starting it again")
		}
		var x int
		err := db.QueryRowContext(ctx, "SELECT x FROM kept").Scan(&x)
		if restarted && err == nil && x == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL did not come back after it was killed (restart logged: %v): %v", restarted, err)
		}
	}
}
