package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestDatabaseOutage stops the database under a running server: data routes and
// /readyz answer 503 while it is still down (they do not wait for it), and the same
// server recovers once the database is back.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel() // a database of its own: it waits on containers while other tests run
	e, tsdb := testenv.Stoppable(t, true)
	ctx := context.Background()
	c := e.Client(t)
	if r := c.Get("/api/v2.0/account"); r.Status != 200 {
		t.Fatalf("before outage: %d %s", r.Status, r.Body)
	}

	if err := tsdb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v2.0/account", "/readyz"} {
		start := time.Now()
		r := c.Get(path)
		if d := time.Since(start); d > testenv.Patience {
			t.Errorf("%s took %v during the outage: it waited for the database", path, d)
		}
		// the cause: refused connections, or the shutdown notice a pooled one got
		if r.Status != 503 || (string(r.Body) != `{"code":503001,"message":"Service unavailable.","detail":"The database cannot be reached."}` &&
			string(r.Body) != `{"code":503001,"message":"Service unavailable.","detail":"The database is restarting or recovering."}`) {
			t.Fatalf("%s during outage: %d %s", path, r.Status, r.Body)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", path)
		}
	}

	if err := tsdb.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := c.Get("/api/v2.0/account")
		if r.Status == 200 && c.Get("/readyz").Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after restart: %d %s", r.Status, r.Body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestOutageDuringIngestion stops and restarts the database while a burst of small
// messages is written through the group commit: every acknowledged message is stored
// whole, no message is stored in part, requests during the outage fail with 503, and
// writing resumes without a restart. (That bursts share batches is
// TestFleetConcurrentSingleDots'; how fast a 503 comes, TestDatabaseOutage's.)
func TestOutageDuringIngestion(t *testing.T) {
	t.Parallel() // a database of its own: it waits on containers while other tests run
	e, tsdb := testenv.Stoppable(t, false)
	ctx := context.Background()
	c := e.Client(t)

	const writers, batch = 32, 2
	var mu sync.Mutex
	acked := map[int]bool{} // batch number → acknowledged
	var seen503 atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := w*1_000_000 + i
				dots := make([]map[string]any, batch)
				for j := range dots {
					dots[j] = map[string]any{"value": n, "timestamp": int64(n)*batch + int64(j)}
				}
				r := c.Post("/api/v1.6/devices/outage/v/values", dots)
				switch r.Status {
				case 201:
					mu.Lock()
					acked[n] = true
					mu.Unlock()
				case 503:
					seen503.Store(true)
					time.Sleep(50 * time.Millisecond)
				default:
					t.Errorf("batch %d: %d %s", n, r.Status, r.Body)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if err := tsdb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1 * time.Second)
	if err := tsdb.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// keep writing until writes succeed again, then a little longer
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		before := len(acked)
		mu.Unlock()
		time.Sleep(1 * time.Second)
		mu.Lock()
		after := len(acked)
		mu.Unlock()
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes did not resume after the restart")
		}
	}
	close(stop)
	wg.Wait()
	if !seen503.Load() {
		t.Fatal("no request saw the outage")
	}

	// every batch is all there (acknowledged or not) or absent, never in part
	var rows []struct {
		N     int64 `bun:"n"`
		Count int   `bun:"count"`
	}
	err := e.DB.NewRaw(`SELECT value::bigint AS n, count(*) AS count FROM "values" GROUP BY value`).Scan(ctx, &rows)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int]int{}
	for _, r := range rows {
		stored[int(r.N)] = r.Count
	}
	for n, cnt := range stored {
		if cnt != batch {
			t.Errorf("batch %d stored in part: %d of %d dots", n, cnt, batch)
		}
	}
	for n := range acked {
		if stored[n] != batch {
			t.Errorf("acknowledged batch %d lost: %d dots stored", n, stored[n])
		}
	}
	t.Logf("%d messages acknowledged, %d stored", len(acked), len(stored))
}

// TestClientDisconnectWritesNothing: a client that goes away in the middle of sending
// its body leaves no partial write.
func TestClientDisconnectWritesNothing(t *testing.T) {
	c := env.Client(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	body.WriteString(`{"temperature":[`)
	for i := range 20_000 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"value":%d,"timestamp":%d}`, i, i+1)
	}
	body.WriteString(`]}`)
	full := body.String()
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1.6/devices/gone/ HTTP/1.1\r\nHost: %s\r\nX-Auth-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		u.Host, env.AdminToken, len(full))
	if _, err := conn.Write([]byte(full[:len(full)/2])); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	_ = conn.Close()
	time.Sleep(500 * time.Millisecond) // let the server notice and finish the request
	var devices, values int
	err = env.DB.NewRaw(`SELECT (SELECT count(*) FROM devices WHERE label = 'gone'),
		(SELECT count(*) FROM "values" v JOIN variables x ON x.id = v.variable_id JOIN devices d ON d.id = x.device_id WHERE d.label = 'gone')`).
		Scan(context.Background(), &devices, &values)
	if err != nil {
		t.Fatal(err)
	}
	if devices != 0 || values != 0 {
		t.Fatalf("a request cut off mid-body wrote %d devices and %d values", devices, values)
	}
	// the same body sent whole is written whole
	if r := c.Post("/api/v1.6/devices/gone/", full); r.Status != 200 {
		t.Fatalf("whole body: %d %.200s", r.Status, r.Body)
	}
	_ = env.DB.NewRaw(`SELECT count(*) FROM "values" v JOIN variables x ON x.id = v.variable_id JOIN devices d ON d.id = x.device_id WHERE d.label = 'gone'`).
		Scan(context.Background(), &values)
	if values != 20_000 {
		t.Fatalf("whole body stored %d values", values)
	}
}

// TestQueryTimeoutAnswersJSON: with SENSORAPI_QUERY_TIMEOUT short, a long analytics
// query is cancelled by the database and answered with the timeout body; the service's
// connections stay usable.
func TestQueryTimeoutAnswersJSON(t *testing.T) {
	ctx := context.Background()
	points := make([]testenv.Point, 400_000)
	for i := range points {
		points[i] = testenv.Point{TS: int64(i) * 1000, Value: float64(i%977) * 1.5}
	}
	tok := env.NewAccount(t)
	s := env.Seed(t, tok, "slow", "v", points)
	db, err := store.Open(ctx, env.DSN, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// the account that owns the variable: another one's request finds no variable, and
	// answered 404 once planning took less than the timeout
	c := serveUnderTimeout(t, db, tok)
	body := fmt.Sprintf(`{"start":0,"end":%d,"variables":[{"variable":"%s"}],"aggregations":["p25","p50","p75","std"]}`,
		int64(len(points))*1000, s.VariableID)
	r := c.Post("/api/v2.0/data/statistics", body)
	want := `{"code":503002,"message":"Query timed out.","detail":"The query ran longer than the configured statement timeout."}`
	if r.Status != 503 || string(r.Body) != want || r.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	// a small query meets 50 ms on an idle machine; on a loaded one it may time out too,
	// but a connection poisoned by the timeout would never answer again
	deadline := time.Now().Add(testenv.Patience)
	for got := c.Get("/api/v2.0/account"); got.Status != 200; got = c.Get("/api/v2.0/account") {
		if got.Status != 503 || time.Now().After(deadline) {
			t.Fatalf("after the timeout: %d %s", got.Status, got.Body)
		}
	}
	// the instance's background workers (synthetic upkeep, rollup catch-up, events) take
	// a connection now and then: a leaked one is still held when they are done
	deadline = time.Now().Add(testenv.Patience)
	for n := db.Pool.Stat().AcquiredConns(); n != 0; n = db.Pool.Stat().AcquiredConns() {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still held %v after the timeout", n, testenv.Patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveUnderTimeout starts the service on db for token, whose statement timeout (50 ms) the
// start's own queries may exceed on a loaded machine: it tries again until it starts.
func serveUnderTimeout(t *testing.T, db *store.DB, token string) *testenv.Client {
	t.Helper()
	for deadline := time.Now().Add(testenv.Patience); ; {
		srv, url, stop, err := env.Start(db, env.Config())
		if err == nil {
			t.Cleanup(stop)
			return (&testenv.Client{URL: url, Token: token, Server: srv}).In(t)
		}
		if !strings.Contains(err.Error(), "57014") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// TestDatabaseFaultsAnswer503WithCause: PostgreSQL reports a fault of its environment
// (a full disk: SQLSTATE 53100, as when it cannot extend a file; out of memory: 53200;
// a read-only transaction: 25006, as on a standby after a failover), raised here by a
// trigger on one variable's values: writes answer 503 naming the cause with
// Retry-After, never 500, nothing is written, and writes go through again once the
// fault is gone.
func TestDatabaseFaultsAnswer503WithCause(t *testing.T) {
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	post := func(v float64) testenv.Response {
		return c.Post("/api/v1.6/devices/faulty/t/values", map[string]any{"value": v, "timestamp": 1000 + int64(v)})
	}
	if r := post(1); r.Status != 201 {
		t.Fatalf("first write: %d %s", r.Status, r.Body)
	}
	var key int64
	if err := env.DB.NewRaw(`SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.label = 'faulty' AND v.label = 't' AND d.account_id = (SELECT account_id FROM tokens
		WHERE hash = sha256(convert_to(?, 'UTF8')))`, c.Token).Scan(ctx, &key); err != nil {
		t.Fatal(err)
	}
	written := []float64{1}
	for i, f := range []struct{ errcode, cause string }{
		{"disk_full", "The database is out of disk space."},
		{"out_of_memory", "The database is out of memory."},
		{"read_only_sql_transaction", "The database is read-only (a standby, e.g. during a failover)."},
	} {
		remove := env.InjectFault(t, key, f.errcode)
		r := post(float64(10 + i))
		body := fmt.Sprintf(`{"code":503001,"message":"Service unavailable.","detail":"%s"}`, f.cause)
		if r.Status != 503 || string(r.Body) != body || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s (Retry-After %q), want 503 %s", f.errcode, r.Status, r.Body, r.Header.Get("Retry-After"), body)
		}
		remove()
		v := float64(20 + i)
		if r := post(v); r.Status != 201 {
			t.Fatalf("after %s: %d %s", f.errcode, r.Status, r.Body)
		}
		written = append(written, v)
	}
	var values []float64
	if err := env.DB.NewRaw(`SELECT value FROM "values" WHERE variable_id = ? ORDER BY ts`, key).Scan(ctx, &values); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(values) != fmt.Sprint(written) {
		t.Fatalf("stored %v, want %v: a refused write left something", values, written)
	}
}

// TestStorageBudgetStopsWrites: past SENSORAPI_WRITE_STOP_SIZE (here 1 byte: the
// database is always past it) writes answer 507 and write nothing, while reads and
// deletes go on; /healthz and /metrics tell the size, the budget and the refusals. A
// budget above the size lets writes through.
func TestStorageBudgetStopsWrites(t *testing.T) {
	open := env.Client(t).As(env.NewAccount(t))
	if r := open.Post("/api/v1.6/devices/budget/t/values", map[string]any{"value": 1, "timestamp": 1000}); r.Status != 201 {
		t.Fatalf("write before the budget: %d %s", r.Status, r.Body)
	}
	cfg := env.Config()
	cfg.WriteStopSize = 1
	full := env.ClientWith(t, cfg).As(open.Token)
	storage := func() map[string]any {
		r := full.Get("/healthz")
		s, _ := r.Object(t)["storage"].(map[string]any)
		return s
	}
	for deadline := time.Now().Add(testenv.Patience); storage()["bytes"] == 0.0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the storage size was not measured")
		}
	}
	for _, w := range []struct{ path, body string }{
		{"/api/v1.6/devices/budget/t/values", `{"value":2,"timestamp":2000}`},
		{"/api/v1.6/devices/budget/", `{"t":{"value":3,"timestamp":3000}}`},
		{"/api/v1.6/devices/budget-new/", `{"t":4}`},
	} {
		r := full.Post(w.path, w.body)
		if r.Status != 507 || string(r.Body) != `{"code":507001,"message":"Storage budget exhausted."}` {
			t.Fatalf("%s over the budget: %d %s", w.path, r.Status, r.Body)
		}
	}
	if r := full.Get("/api/v1.6/devices/budget/t/values"); r.Status != 200 || !strings.Contains(string(r.Body), `"count":true`) ||
		strings.Count(string(r.Body), `"value"`) != 1 {
		t.Fatalf("read over the budget: %d %s", r.Status, r.Body)
	}
	if r := full.Get("/api/v2.0/devices/~budget-new"); r.Status != 404 {
		t.Fatalf("a refused write created its device: %d", r.Status)
	}
	var id struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(full.Get("/api/v2.0/devices/~budget/variables/~t").Body, &id); err != nil || id.ID == "" {
		t.Fatalf("variable id: %v", err)
	}
	if r := full.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/0/1500", id.ID)); r.Status != 204 {
		t.Fatalf("delete over the budget: %d %s", r.Status, r.Body)
	}
	s := storage()
	if s["writeStopBytes"] != 1.0 || s["writesRefused"] != 3.0 || s["bytes"].(float64) < 1e6 {
		t.Fatalf("healthz storage: %v", s)
	}
	m := full.As("").Get("/metrics")
	if !strings.Contains(string(m.Body), "sensorapi_storage_writes_refused_total 3") {
		t.Fatalf("refusals not in /metrics")
	}

	cfg.WriteStopSize = 1 << 50
	roomy := env.ClientWith(t, cfg).As(open.Token)
	if r := roomy.Post("/api/v1.6/devices/budget/t/values", map[string]any{"value": 5, "timestamp": 5000}); r.Status != 201 {
		t.Fatalf("write under the budget: %d %s", r.Status, r.Body)
	}
}

// TestRetentionSizeDropsOldestRawChunks: past SENSORAPI_RETENTION_SIZE (here one byte
// under the database's size) the oldest chunk of raw values is dropped, its rollup
// tiles kept and the raw horizon moved, as time-based retention does; the chunk being
// written is never dropped. A database of its own: the drop moves the horizon for all.
func TestRetentionSizeDropsOldestRawChunks(t *testing.T) {
	e, _ := testenv.Stoppable(t, true)
	c := e.Client(t)
	old := time.Date(2020, 1, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, ts := range []int64{old, time.Now().Add(-time.Minute).UnixMilli()} {
		if r := c.Post("/api/v1.6/devices/sized/t/values", map[string]any{"value": 1, "timestamp": ts}); r.Status != 201 {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	var size int64
	if err := e.DB.NewRaw(`SELECT (SELECT sum(pg_database_size(oid)) FROM pg_database)::bigint +
		(SELECT coalesce(sum(size), 0) FROM pg_ls_waldir())::bigint`).Scan(context.Background(), &size); err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	cfg.Retention.Size = size - 1
	sized := e.ClientWith(t, cfg)
	count := func(table, col string) (n int) {
		if err := e.DB.NewRaw(`SELECT count(*) FROM `+table+` WHERE `+col+` < '2020-01-02'`).Scan(context.Background(), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(testenv.Patience); count(`"values"`, "ts") != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the oldest raw chunk was not dropped past the retention size")
		}
	}
	if n := count("value_minutes", "tile"); n != 1 {
		t.Fatalf("%d minute tiles of the dropped chunk, want 1 kept", n)
	}
	r := sized.Get("/api/v1.6/devices/sized/t/values?page_size=10")
	if r.Status != 200 || strings.Count(string(r.Body), `"value"`) != 1 {
		t.Fatalf("the value being written was dropped too: %d %s", r.Status, r.Body)
	}
	if r := sized.Post("/api/v1.6/devices/sized/t/values", map[string]any{"value": 2, "timestamp": old}); r.Status != 400 {
		t.Fatalf("a write before the moved raw horizon: %d %s", r.Status, r.Body)
	}
}
