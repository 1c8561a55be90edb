package server_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/sensordata/sensorapi/pkg/server"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestStopWaitsForEveryGoroutine (issue 46): an instance stopped while one of its
// background loops is inside a query says it is done (Done) only once that loop has
// returned, so that the pool closes under no one: no query starts or ends, no
// connection is acquired, after Done. Each loop is held in its query by a tracer
// until every other goroutine of the instance has stopped; a loop the instance does
// not wait for lets Done close meanwhile. (The rollups' catch-up first queries after
// a minute; it is started and waited for as these are.)
func TestStopWaitsForEveryGoroutine(t *testing.T) {
	for _, c := range []struct {
		component, sql string
		trigger        func(*server.Instance) // makes the loop query, once the gate is armed
	}{
		{component: "budget", sql: "pg_database_size"},
		{component: "listener", sql: "LISTEN "},
		{component: "events", sql: "FROM events WHERE is_active"},
		{component: "synthetic", sql: "DELETE FROM synthetic_dirty WHERE id IN",
			trigger: func(in *server.Instance) { in.Synthetic.Wake() }},
		{component: "synthetic-graph", sql: "FROM synthetic_variables s JOIN variables v",
			trigger: func(in *server.Instance) { in.Synthetic.Invalidated() }},
	} {
		t.Run(c.component, func(t *testing.T) {
			g := &gate{sql: c.sql, caught: make(chan struct{}), release: make(chan struct{})}
			db := tracedDB(t, g)
			defer g.open() // a failed test too lets the held query go, before the pool closes
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			g.armed.Store(c.trigger == nil) // Start reads the synthetic graph itself
			in, err := server.Start(ctx, db, env.Config(), env.Log)
			if err != nil {
				t.Fatal(err)
			}
			if c.trigger != nil {
				g.armed.Store(true)
				c.trigger(in)
			}
			wait(t, g.caught, "the "+c.component+" loop to query")
			stop()
			testenv.Eventually(t, "every other goroutine of the instance to stop", func() bool {
				return closed(in.Done()) || onlyComponent(c.component)
			})
			if closed(in.Done()) {
				t.Fatalf("Done closed while the %s loop was still in a query", c.component)
			}
			g.open()
			wait(t, in.Done(), "Done")
			g.done.Store(true)
			_ = db.Close()
			if n := g.late.Load(); n > 0 {
				t.Fatalf("%d uses of the pool after Done, the first from:\n%s", n, g.first.Load())
			}
		})
	}
}

// gate is a pgx tracer that holds the first query holding sql once armed, until
// release, and counts every use of a connection after done.
type gate struct {
	sql     string
	armed   atomic.Bool
	held    sync.Once
	caught  chan struct{} // closed when the query is held
	opened  sync.Once
	release chan struct{}
	done    atomic.Bool
	late    atomic.Int64
	first   atomic.Value // the stack of the first use after done, for the failure
}

// open lets the held query go on.
func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

func (g *gate) use() {
	if g.done.Load() {
		g.late.Add(1)
		g.first.CompareAndSwap(nil, string(debug.Stack()))
	}
}

func (g *gate) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	g.use()
	if g.armed.Load() && strings.Contains(d.SQL, g.sql) {
		held := false
		g.held.Do(func() { held = true; close(g.caught) })
		if held {
			<-g.release
		}
	}
	return ctx
}

func (g *gate) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { g.use() }

func (g *gate) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	g.use()
	return ctx
}

func (g *gate) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { g.use() }

func (g *gate) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) { g.use() }

func (g *gate) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	g.use()
	return ctx
}

func (g *gate) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) { g.use() }

func (g *gate) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	g.use()
	return ctx
}

// TraceConnectEnd counts nothing: a connection an instance goroutine began to open
// before Done may end after it, in the pool's own goroutine (pgxpool finishes a connect
// whose acquirer gave up, for the next one), and the pool's Close then closes it.
func (g *gate) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {}

// tracedDB opens the test database through a pool traced by g (the instance's
// LISTEN connection copies its configuration, tracer included).
func tracedDB(t *testing.T, g *gate) *store.DB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = g
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := &store.DB{DB: bun.NewDB(stdlib.OpenDBFromPool(pool), pgdialect.New()), Pool: pool}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// onlyComponent tells whether goroutines labelled component=name (server.Instance
// labels its own) are running, and no goroutine labelled with another component.
func onlyComponent(name string) bool {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		panic(err)
	}
	found := false
	for s := bufio.NewScanner(&b); s.Scan(); {
		labels, ok := strings.CutPrefix(s.Text(), "# labels: ")
		if !ok || !strings.Contains(labels, `"component":`) {
			continue
		}
		if !strings.Contains(labels, `"component":"`+name+`"`) {
			return false
		}
		found = true
	}
	return found
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// wait waits for c, failing the test after testenv.Patience.
func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(testenv.Patience):
		t.Fatalf("not within %v: %s", testenv.Patience, what)
	}
}
