package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sensordata/sensorapi/testcontainers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// replicated is a service on a primary with one streaming replica (API.md §15).
type replicated struct {
	c       *testenv.Client
	pair    *testcontainers.Pair
	replica *pgx.Conn // to the test database on the replica
}

// newReplicated starts a primary and a replica (pg_basebackup -R inside the replica
// container) and the service with DATABASE_REPLICA_URL set and the given MAX_LAG.
func newReplicated(t *testing.T, maxLag time.Duration) replicated {
	t.Helper()
	e, pair, replicaDSN := testenv.Replicated(t)
	conn := waitForReplica(t, replicaDSN)
	cfg := e.Config()
	cfg.ReplicaURLs, cfg.ReplicaMaxLag = []string{replicaDSN}, maxLag
	return replicated{c: e.ClientWith(t, cfg), pair: pair, replica: conn}
}

// waitForReplica connects to the test database once the replica has replayed its
// creation.
func waitForReplica(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica: %v", err)
		}
	}
}

// replicaReads counts the transactions the replica ran in the test database.
func (r replicated) replicaReads(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := r.replica.QueryRow(context.Background(),
		`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (r replicated) served(pool string) float64 {
	return testutil.ToFloat64(r.c.Server.Replicas.Reads().WithLabelValues(pool))
}

// TestReplicaReadYourWrites: reads run on the replica (its own statistics show them),
// and every one of 1,000 write-then-read pairs reads its own write.
func TestReplicaReadYourWrites(t *testing.T) {
	t.Parallel() // a database of its own: it waits on containers while other tests run
	r := newReplicated(t, time.Second)
	before := r.replicaReads(t)
	const pairs = 1000
	var took []time.Duration
	for i := range pairs {
		ts := 1_000_000 + i
		if resp := r.c.Post("/api/v1.6/devices/ryw/t/values", map[string]any{"value": i, "timestamp": ts}); resp.Status != 201 {
			t.Fatalf("write %d: %d %s", i, resp.Status, resp.Body)
		}
		start := time.Now()
		dots := readValues(t, r.c, fmt.Sprintf("/api/v1.6/devices/ryw/t/values?start=%d&end=%d", ts, ts))
		took = append(took, time.Since(start))
		if len(dots) != 1 || dots[0].Value != float64(i) {
			t.Fatalf("read %d did not see its write: %v", i, dots)
		}
	}
	// the analytics run there too, and see every write before them
	id := r.c.Get("/api/v2.0/devices/~ryw/variables/~t/").Object(t)["id"].(string)
	stats := r.c.Post("/api/v2.0/data/statistics/", map[string]any{"start": 0, "end": 2_000_000,
		"variables": []any{map[string]any{"variable": id}}, "aggregations": []string{"count"}})
	if !strings.Contains(string(stats.Body), fmt.Sprintf(`"count":{"value":%d}`, pairs)) {
		t.Fatalf("statistics: %d %s", stats.Status, stats.Body)
	}
	onReplica, onPrimary := r.served("replica-0"), r.served("primary")
	slices.Sort(took)
	t.Logf("reads: %v on the replica, %v on the primary; write-then-read: read p50 %v, p99 %v",
		onReplica, onPrimary, took[pairs/2], took[pairs*99/100])
	if onReplica < pairs/2+1 {
		t.Fatalf("only %v of %d reads ran on the replica", onReplica, pairs)
	}
	if got := r.replicaReads(t) - before; got < int64(onReplica) {
		t.Fatalf("the replica's pg_stat_database counts %d transactions, the service says it sent %v", got, onReplica)
	}
}

// TestReplicaPausedFallsBack: with replay paused on the replica, a read still sees the
// write before it, from the primary, and no request fails. (Replay stays paused until
// every read is done: a read that waited for the replica would never end.)
func TestReplicaPausedFallsBack(t *testing.T) {
	t.Parallel() // a database of its own: it waits on containers while other tests run
	const maxLag = 300 * time.Millisecond
	r := newReplicated(t, maxLag)
	if _, err := r.replica.Exec(context.Background(), `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if resp := r.c.Post("/api/v1.6/devices/paused/t/values", map[string]any{"value": i, "timestamp": 1 + i}); resp.Status != 201 {
			t.Fatalf("write: %d %s", resp.Status, resp.Body)
		}
		dots := readValues(t, r.c, "/api/v1.6/devices/paused/t/values")
		if len(dots) != i+1 {
			t.Fatalf("read %d saw %d values", i, len(dots))
		}
	}
	if _, err := r.replica.Exec(context.Background(), `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaDownNoErrors: with the replica container stopped, reads move to the
// primary without an error, /readyz says so, and they move back once it returns.
func TestReplicaDownNoErrors(t *testing.T) {
	t.Parallel() // a database of its own: it waits on containers while other tests run
	r := newReplicated(t, 500*time.Millisecond)
	ctx := context.Background()
	read := func() {
		t.Helper()
		if resp := r.c.Post("/api/v1.6/devices/down/t/values", map[string]any{"value": 1}); resp.Status != 201 {
			t.Fatalf("write: %d %s", resp.Status, resp.Body)
		}
		readValues(t, r.c, "/api/v1.6/devices/down/t/values")
	}
	read()
	if err := r.pair.Replica.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	primary := r.served("primary")
	for range 20 {
		read()
	}
	if r.served("primary") < primary+20 {
		t.Fatalf("reads did not move to the primary: %v → %v", primary, r.served("primary"))
	}
	if resp := r.c.Get("/readyz"); resp.Status != 200 || !strings.Contains(string(resp.Body), `"up":false`) {
		t.Fatalf("/readyz with the replica down: %d %s", resp.Status, resp.Body)
	}
	if err := r.pair.Replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	replica := r.served("replica-0")
	for deadline := time.Now().Add(60 * time.Second); r.served("replica-0") == replica; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("reads did not move back to the replica")
		}
		read()
	}
}
