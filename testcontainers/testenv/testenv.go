// Package testenv gives integration tests a real, migrated TimescaleDB database and the
// real HTTP stack on it. Each test package gets a database of its own: on the server
// named by TEST_DATABASE_URL when set, else in a TimescaleDB container started by the
// project's testcontainers package.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers"
)

// Env is a test package's database.
type Env struct {
	DSN        string
	DB         *store.DB
	AdminToken string
	Log        *slog.Logger
	close      func()
}

// Run starts the database, migrates it, bootstraps the admin account, runs the tests and
// cleans up. Use it from TestMain: os.Exit(testenv.Run(m, &env)).
func Run(m *testing.M, env **Env) int {
	if isFuzzWorker() {
		return m.Run() // a worker only runs the fuzz function: no database of its own
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	server := os.Getenv("TEST_DATABASE_URL")
	if server == "" {
		tsdb, err := testcontainers.Start(ctx, testcontainers.Options{Fast: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			return 1
		}
		defer func() { _ = tsdb.Terminate(context.Background()) }()
		server = tsdb.DSN
	}
	e, err := New(ctx, server)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer e.Close()
	*env = e
	return m.Run()
}

// isFuzzWorker tells whether this process is a `go test -fuzz` worker, which the
// coordinator (that ran TestMain in full) starts once per CPU.
func isFuzzWorker() bool {
	flag.Parse()
	w := flag.Lookup("test.fuzzworker")
	return w != nil && w.Value.String() == "true"
}

// Close closes the pool and drops the database.
func (e *Env) Close() { e.close() }

// New makes a fresh database on the server, migrated and bootstrapped.
func New(ctx context.Context, server string) (*Env, error) {
	name := "test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", redact(server), err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close(context.Background())
	}
	u, _ := url.Parse(server)
	u.Path = "/" + name
	e := &Env{DSN: u.String(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("TEST_LOG") != "" {
		e.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if e.DB, err = store.Open(ctx, e.DSN, 30*time.Second); err != nil {
		drop()
		return nil, err
	}
	if _, err := store.Migrate(ctx, e.DB); err != nil {
		drop()
		return nil, err
	}
	e.AdminToken = "admin-" + randomHex(16)
	if _, err := auth.Bootstrap(ctx, e.DB, e.AdminToken); err != nil {
		drop()
		return nil, err
	}
	e.close = func() { _ = e.DB.Close(); drop() }
	return e, nil
}

// NewAccount creates another account and returns its token (for isolation tests).
func (e *Env) NewAccount(t testing.TB) string {
	t.Helper()
	tok, err := auth.CreateAccount(context.Background(), e.DB, "acct_"+randomHex(6))
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	return tok
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// Stoppable starts a TimescaleDB container of the test's own, which the test may stop
// and restart (outage tests), with a migrated database on it; both go when the test
// ends. fast turns off fsync. Tests that need it are skipped with TEST_DATABASE_URL.
func Stoppable(t testing.TB, fast bool) (*Env, *testcontainers.TimescaleDB) {
	t.Helper()
	return Container(t, testcontainers.Options{Fast: fast})
}

// OnTmpfs is Stoppable with the data directory (WAL included) on a tmpfs of mb MiB,
// for the full-disk tests (testcontainers.Options.TmpfsDataMB). fsync stays on.
func OnTmpfs(t testing.TB, mb int) (*Env, *testcontainers.TimescaleDB) {
	t.Helper()
	return Container(t, testcontainers.Options{TmpfsDataMB: mb})
}

// Container starts a TimescaleDB container of the test's own with opts, with a
// migrated database on it; both go when the test ends. Tests that need it are skipped
// with TEST_DATABASE_URL.
func Container(t testing.TB, opts testcontainers.Options) (*Env, *testcontainers.TimescaleDB) {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("needs a container of its own")
	}
	ctx := context.Background()
	tsdb, err := testcontainers.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tsdb.Terminate(context.Background()) })
	e, err := New(ctx, tsdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, tsdb
}

// Replicated starts a primary and a streaming replica of it (containers of the test's
// own, fsync off) with a migrated database on the primary; replicaDSN reaches that
// database on the replica. All go when the test ends. Skipped with TEST_DATABASE_URL.
func Replicated(t testing.TB) (e *Env, pair *testcontainers.Pair, replicaDSN string) {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("needs containers of its own")
	}
	ctx := context.Background()
	pair, err := testcontainers.StartPair(ctx, testcontainers.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Terminate(context.Background()) })
	if e, err = New(ctx, pair.Primary.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	p, _ := url.Parse(e.DSN)
	r, _ := url.Parse(pair.Replica.DSN)
	r.Path = p.Path // the test database, replicated
	return e, pair, r.String()
}

// InjectFault makes PostgreSQL fail every insert of variable key's values with SQLSTATE
// errcode (a condition name such as disk_full), as it does when the fault is real,
// until the returned function (also run at the test's end) removes it.
func (e *Env) InjectFault(t testing.TB, key int64, errcode string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN RAISE EXCEPTION 'injected fault' USING ERRCODE = '%s'; END $$`, errcode),
		fmt.Sprintf(`CREATE TRIGGER test_fault BEFORE INSERT ON "values" FOR EACH ROW
		 WHEN (NEW.variable_id = %d) EXECUTE FUNCTION test_fault()`, key),
	} {
		if _, err := e.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	remove = func() {
		if _, err := e.DB.ExecContext(ctx, `DROP TRIGGER IF EXISTS test_fault ON "values"; DROP FUNCTION IF EXISTS test_fault()`); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(remove)
	return remove
}

// LoadEnv names the variable under which the load tests run (LoadTest).
const LoadEnv = "SENSORAPI_TEST_LOAD"

// LoadTest skips a test that loads the machine (fills a disk, floods a fault proxy)
// and holds timing bounds of its own, unless LoadEnv is 1: `make test` runs those in a
// step of their own after the rest, one package at a time, so that they neither starve
// the timing-bound tests of the packages running beside them nor are starved by them.
func LoadTest(t testing.TB) {
	t.Helper()
	if os.Getenv(LoadEnv) != "1" {
		t.Skip("a load test: make test runs it in its own step (" + LoadEnv + "=1)")
	}
}

// Patience bounds how long a test waits for what must happen eventually (a
// notification delivered, a revoked token refused elsewhere, a restarted database
// answering). It is generous on purpose: a test holds on any machine, however loaded;
// how fast these things happen is measured by make bench, not asserted here.
const Patience = 30 * time.Second

// Eventually polls cond every 10 ms until it holds, failing the test with what after
// Patience.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Patience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", Patience, what)
		}
	}
}

// SQLASCIIDatabase creates a database encoded SQL_ASCII (what initdb gives without a
// locale) on the test server, dropped when the test ends, and returns its DSN.
func (e *Env) SQLASCIIDatabase(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.DB.ExecContext(ctx, `CREATE DATABASE `+name+` ENCODING 'SQL_ASCII' TEMPLATE template0`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.DB.ExecContext(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
