package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/testcontainers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// The full-disk tests put PostgreSQL's data directory (WAL included) on a tmpfs of
// tmpfsMB MiB and fill it through the real HTTP API with bodies of bodyDots dots.
const (
	tmpfsMB  = 384
	bodyDots = 2000
	diskPath = "/api/v1.6/devices/disk/v/values"
)

// diskWriters posts bodies of bodyDots dots from several goroutines, body n holding the
// value n at timestamps of its own, and records what each body was answered.
type diskWriters struct {
	c    *testenv.Client
	base int64         // ms: the first body's first timestamp
	pace time.Duration // each writer sends a body at most this often (0: flat out)

	mu       sync.Mutex
	acked    map[int]bool   // body → 201
	statuses map[int]int    // status → answers
	bodies   map[string]int // status and body of the non-201 answers → answers
	next     int
	first    map[int]time.Time // status → when it was first answered
	// MQTT bodies acknowledged (PUBACK) and not (no PUBACK, connection closed)
	mqttAcked, mqttUnacked int
	stop                   chan struct{}
	wg                     sync.WaitGroup
}

func startDiskWriters(c *testenv.Client, writers int, pace time.Duration) *diskWriters {
	w := &diskWriters{c: c, pace: pace, base: time.Now().Add(-2 * time.Hour).UnixMilli(), acked: map[int]bool{},
		statuses: map[int]int{}, bodies: map[string]int{}, first: map[int]time.Time{}, stop: make(chan struct{})}
	for range writers {
		w.wg.Add(1)
		go w.run()
	}
	return w
}

func (w *diskWriters) run() {
	defer w.wg.Done()
	var b strings.Builder
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		w.mu.Lock()
		n := w.next
		w.next++
		w.mu.Unlock()
		b.Reset()
		b.WriteByte('[')
		for j := range bodyDots {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"value":%d,"timestamp":%d}`, n, w.base+int64(n)*bodyDots+int64(j))
		}
		b.WriteByte(']')
		sent := time.Now()
		r := w.post(b.String())
		w.mu.Lock()
		w.statuses[r.Status]++
		if _, ok := w.first[r.Status]; !ok {
			w.first[r.Status] = time.Now()
		}
		if r.Status == 201 {
			w.acked[n] = true
		} else {
			k := strconv.Itoa(r.Status) + " " + string(r.Body)
			if r.Status == 503 && r.Header.Get("Retry-After") == "" {
				k += " (no Retry-After)"
			}
			w.bodies[k]++
		}
		w.mu.Unlock()
		if r.Status != 201 {
			time.Sleep(100 * time.Millisecond)
		} else if d := w.pace - time.Since(sent); d > 0 {
			time.Sleep(d)
		}
	}
}

// post sends a body over real HTTP to the real server, unlike Client.Post without
// checking 2,000-dot bodies against the OpenAPI document (which would slow the writers
// down several times; the answers' shapes are asserted by the test).
func (w *diskWriters) post(body string) testenv.Response {
	req, err := http.NewRequest("POST", w.c.URL+diskPath, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", w.c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return testenv.Response{Status: -1, Body: []byte(err.Error())}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return testenv.Response{Status: -1, Body: []byte(err.Error())}
	}
	return testenv.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// mqttBase numbers the MQTT writer's bodies apart from the HTTP writers'.
const mqttBase = 1_000_000

// startMQTT starts the broker on c's instance and an MQTT writer on it (runMQTT).
func (w *diskWriters) startMQTT(t *testing.T, c *testenv.Client) {
	broker, err := c.Server.StartMQTT(config.MQTT{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Close() })
	w.wg.Add(1)
	go w.runMQTT(t, broker.Addrs()[0].String(), c.Token)
}

// runMQTT publishes bodies of bodyDots dots with QoS 1 over MQTT 3.1.1 (paho) to the
// variable disk/m, recording a body as acknowledged on its PUBACK. Past the budget a
// 3.1.1 publish gets no PUBACK and its connection is closed: the writer connects again
// and goes on with the next body (a real client would send the same one again).
func (w *diskWriters) runMQTT(t *testing.T, addr, token string) {
	defer w.wg.Done()
	connect := func() paho.Client {
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(token).
			SetClientID(fmt.Sprintf("fulldisk-%d", time.Now().UnixNano())).
			SetConnectTimeout(5 * time.Second).SetAutoReconnect(false)
		c := paho.NewClient(o)
		if tk := c.Connect(); !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
			t.Errorf("MQTT connect: %v", tk.Error())
			return nil
		}
		return c
	}
	c := connect()
	var b strings.Builder
	for n := mqttBase; c != nil; n++ {
		select {
		case <-w.stop:
			c.Disconnect(100)
			return
		default:
		}
		b.Reset()
		b.WriteByte('[')
		for j := range bodyDots {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"value":%d,"timestamp":%d}`, n, w.base+int64(n-mqttBase)*bodyDots+int64(j))
		}
		b.WriteByte(']')
		sent := time.Now()
		tk := c.Publish("/v1.6/devices/disk/m", 1, false, b.String())
		acked := tk.WaitTimeout(10*time.Second) && tk.Error() == nil
		w.mu.Lock()
		if acked {
			w.acked[n] = true
			w.mqttAcked++
		} else {
			w.mqttUnacked++
		}
		w.mu.Unlock()
		if !acked {
			c.Disconnect(0)
			time.Sleep(100 * time.Millisecond)
			c = connect()
		} else if d := w.pace - time.Since(sent); d > 0 {
			time.Sleep(d)
		}
	}
}

// seen is how many answers had the status.
func (w *diskWriters) seen(status int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statuses[status]
}

func (w *diskWriters) halt() {
	close(w.stop)
	w.wg.Wait()
}

// checkStored: every acknowledged body is stored whole, and nothing else is stored
// (a refused body writes nothing, none is stored in part).
func (w *diskWriters) checkStored(t *testing.T, e *testenv.Env) {
	t.Helper()
	var rows []struct {
		N     int `bun:"n"`
		Count int `bun:"count"`
	}
	if err := e.DB.NewRaw(`SELECT value::int AS n, count(*) AS count FROM "values" GROUP BY value`).
		Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	stored := map[int]int{}
	for _, r := range rows {
		stored[r.N] = r.Count
	}
	for n, cnt := range stored {
		if !w.acked[n] {
			t.Errorf("body %d stored (%d dots) though not acknowledged", n, cnt)
		} else if cnt != bodyDots {
			t.Errorf("body %d: %d dots stored, want %d", n, cnt, bodyDots)
		}
	}
	for n := range w.acked {
		if stored[n] == 0 {
			t.Errorf("acknowledged body %d lost", n)
		}
	}
	if len(w.acked) == 0 || len(stored) != len(w.acked) {
		t.Errorf("%d bodies acknowledged, %d stored", len(w.acked), len(stored))
	}
}

// diskReader reads values and /readyz every 200 ms until stopped, failing the test on
// any answer but 200.
func diskReader(t *testing.T, c *testenv.Client) (stop func() int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	reads := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, p := range []string{diskPath + "?page_size=5", "/readyz"} {
				if r := c.Get(p); r.Status != 200 {
					t.Errorf("read %s while filling the disk: %d %s", p, r.Status, r.Body)
				}
				reads++
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() int { close(done); wg.Wait(); return reads }
}

func storageBytes(t *testing.T, c *testenv.Client) int64 {
	t.Helper()
	s, _ := c.Get("/healthz").Object(t)["storage"].(map[string]any)
	b, _ := s["bytes"].(float64)
	return int64(b)
}

// tmpfsUsed is what the tmpfs holds, in bytes (df).
func tmpfsUsed(t *testing.T, tsdb *testcontainers.TimescaleDB) int64 {
	t.Helper()
	out, err := tsdb.Exec(context.Background(), "df -B1 --output=used "+testcontainers.TmpfsDir+" | tail -1")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("df: %q: %v", out, err)
	}
	return n
}

func panics(t *testing.T, tsdb *testcontainers.TimescaleDB) []string {
	t.Helper()
	logs, err := tsdb.Logs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "database system is ready to accept connections") {
		t.Fatalf("the container's logs are not PostgreSQL's: %.500s", logs)
	}
	var p []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "PANIC:") {
			p = append(p, l)
		}
	}
	return p
}

// TestFullDiskBudgetStopsWrites (issue 33): PostgreSQL on a tmpfs of 384 MiB, the
// service with SENSORAPI_WRITE_STOP_SIZE well under it, HTTP writers posting 2,000-dot
// bodies as fast as they can: writes turn to 507 before the disk fills, no answer is
// a 500, every acknowledged dot is stored and nothing else, reads and /readyz answer
// throughout and after, and PostgreSQL never PANICs.
func TestFullDiskBudgetStopsWrites(t *testing.T) {
	testenv.LoadTest(t)
	start := time.Now()
	e, tsdb := testenv.OnTmpfs(t, tmpfsMB)
	// the disk must hold the budget, max_wal_size (64MB) and what the writers add in
	// the budget's 5 s between measurements
	const budget = 128 << 20
	cfg := e.Config()
	cfg.WriteStopSize = budget
	c := e.ClientWith(t, cfg)
	for deadline := time.Now().Add(testenv.Patience); storageBytes(t, c) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the storage size was not measured")
		}
	}
	initial := storageBytes(t, c)
	// 4 writers, each a 2,000-dot body every 150 ms at most: ~53,000 dots/s, ~10 MiB/s,
	// so that the 5 s between measurements add ~50 MiB past the budget. Flat out this
	// machine writes ~40 MiB/s: the room a budget leaves must follow the write rate.
	w := startDiskWriters(c, 4, 150*time.Millisecond)
	w.startMQTT(t, c)
	deadline := time.Now().Add(60 * time.Second)
	for w.seen(201) == 0 && time.Now().Before(deadline) { // the variable exists
		time.Sleep(10 * time.Millisecond)
	}
	stopReads := diskReader(t, c)
	var at507 int64
	for w.seen(507) == 0 {
		if time.Now().After(deadline) {
			w.halt()
			t.Fatalf("no 507 within 60 s: %v", w.statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
	at507 = storageBytes(t, c)
	time.Sleep(3 * time.Second) // writers keep knocking past the budget
	w.halt()
	reads := stopReads()
	filled := time.Since(start)

	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("tmpfs %d MiB, budget %d MiB; size %.1f MiB at start, %.1f MiB at the first 507 (%.1f s after the first write); tmpfs used %.1f MiB at the end; answers %v; MQTT %d PUBACKs, %d refused; %d reads; %v",
		tmpfsMB, budget>>20, float64(initial)/(1<<20), float64(at507)/(1<<20), w.first[507].Sub(w.first[201]).Seconds(),
		float64(tmpfsUsed(t, tsdb))/(1<<20), w.statuses, w.mqttAcked, w.mqttUnacked, reads, filled.Round(100*time.Millisecond))
	for k, n := range w.bodies {
		if k != `507 {"code":507001,"message":"Storage budget exhausted."}` {
			t.Errorf("%d answers %s", n, k)
		}
	}
	if w.statuses[500] != 0 || w.statuses[201] == 0 || w.statuses[507] == 0 {
		t.Errorf("answers %v: want 201s then 507s, no 500", w.statuses)
	}
	if w.mqttAcked == 0 || w.mqttUnacked == 0 {
		t.Errorf("MQTT: %d bodies acknowledged, %d not: want PUBACKs under the budget and none past it", w.mqttAcked, w.mqttUnacked)
	}
	if at507 < budget {
		t.Errorf("507 at %d bytes, under the budget of %d", at507, budget)
	}
	w.checkStored(t, e)
	if r := c.Post(diskPath, `{"value":-1}`); r.Status != 507 {
		t.Errorf("a write after the test: %d %s", r.Status, r.Body)
	}
	for _, p := range []string{diskPath + "?page_size=5", "/readyz", "/api/v2.0/devices/~disk"} {
		if r := c.Get(p); r.Status != 200 {
			t.Errorf("read %s after filling: %d %s", p, r.Status, r.Body)
		}
	}
	if p := panics(t, tsdb); len(p) > 0 {
		t.Errorf("PostgreSQL PANICked %d times: %s", len(p), p[0])
	}
}

// resume starts the writers again after halt.
func (w *diskWriters) resume(writers int) {
	w.stop = make(chan struct{})
	for range writers {
		w.wg.Add(1)
		go w.run()
	}
}

// TestFullDiskWithoutBudget (issue 33): with no write stop, PostgreSQL's tmpfs fills
// (a ballast file beside the data directory leaves it ~48 MiB, as another tenant of
// the disk would): writes answer 503 "The database is out of disk space." with
// Retry-After, never 500; every acknowledged dot is stored and nothing else; once the
// ballast is deleted (freeing space outside the data directory, as docs/operations.md
// says to), writes answer 201 again without restarting anything.
func TestFullDiskWithoutBudget(t *testing.T) {
	testenv.LoadTest(t)
	start := time.Now()
	e, tsdb := testenv.OnTmpfs(t, tmpfsMB)
	ctx := context.Background()
	c := e.Client(t)
	const room = 48 << 20
	if _, err := tsdb.Exec(ctx, `avail=$(df -B1 --output=avail `+testcontainers.TmpfsDir+` | tail -1) &&
		head -c $((avail - `+strconv.Itoa(room)+`)) /dev/zero > `+testcontainers.TmpfsDir+`/ballast`); err != nil {
		t.Fatal(err)
	}
	w := startDiskWriters(c, 4, 0)
	w.startMQTT(t, c)
	const diskFull = `503 {"code":503001,"message":"Service unavailable.","detail":"The database is out of disk space."}`
	full := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.bodies[diskFull]
	}
	deadline := time.Now().Add(60 * time.Second)
	for full() == 0 {
		if time.Now().After(deadline) {
			w.halt()
			t.Fatalf("no disk-full 503 within 60 s: %v", w.statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
	firstFull := time.Since(start)
	time.Sleep(2 * time.Second) // writers keep knocking on the full disk
	w.halt()
	w.mu.Lock()
	t.Logf("tmpfs %d MiB with %d MiB free at the start; first disk-full 503 after %.1f s of writing; answers %v",
		tmpfsMB, room>>20, w.first[503].Sub(w.first[201]).Seconds(), w.statuses)
	for k, n := range w.bodies {
		t.Logf("%d × %s", n, k)
		if !strings.HasPrefix(k, `503 {"code":503001,"message":"Service unavailable.","detail":"The database `) ||
			strings.HasSuffix(k, "(no Retry-After)") {
			t.Errorf("%d answers %s: want 503 naming the cause", n, k)
		}
	}
	if w.statuses[500] != 0 || w.statuses[201] == 0 {
		t.Errorf("answers %v: want 201s then 503s, no 500", w.statuses)
	}
	w.mu.Unlock()
	p := panics(t, tsdb)
	t.Logf("%d PostgreSQL PANICs on the full disk%s", len(p), strings.Join(append([]string{""}, p...), "\n  "))

	if _, err := tsdb.Exec(ctx, "rm "+testcontainers.TmpfsDir+"/ballast"); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	acked := w.seen(201)
	w.resume(2)
	for deadline := time.Now().Add(testenv.Patience); w.seen(201) == acked; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			w.halt()
			t.Fatalf("writes did not resume within %v of freeing space: %v", testenv.Patience, w.statuses)
		}
	}
	resumed := time.Since(freed)
	time.Sleep(500 * time.Millisecond)
	w.halt()
	for _, path := range []string{diskPath + "?page_size=5", "/readyz"} {
		if r := c.Get(path); r.Status != 200 {
			t.Errorf("read %s after freeing space: %d %s", path, r.Status, r.Body)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkStored(t, e)
	if w.mqttAcked+w.mqttUnacked == 0 {
		t.Error("the MQTT writer published nothing")
	}
	t.Logf("writes answered 201 again %.1f s after freeing space; %d bodies acknowledged in all (MQTT %d PUBACKs, %d without); first disk-full 503 at %v, test %v",
		resumed.Seconds(), len(w.acked), w.mqttAcked, w.mqttUnacked, firstFull.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}
