// TestFailover (issue 30, API.md §19): the service on a Patroni pair whose primary is
// killed under HTTP and MQTT writers (make test-ha). What it tests is mostly here:
// multi-host DATABASE_URL finding the primary, the replicas' pools; and the LISTEN
// connection (pkg/notify) and MQTT subscribers that must follow the new primary.
package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// HAEnv names the variable under which TestFailover runs: make test-ha sets it.
const HAEnv = "SENSORAPI_TEST_HA"

// maxUnavailable is issue 30's bound on a failover, first failed to first successful
// write (Patroni's ttl, 20 s, is most of it).
const maxUnavailable = 30 * time.Second

// TestFailover runs the service on a Patroni pair (etcd, two TimescaleDB nodes,
// synchronous_mode) through a multi-host DATABASE_URL, with HTTP and MQTT (paho) writers
// writing continuously, each resending a write until it is acknowledged, and an MQTT
// subscriber. SENSORAPI_FAILOVERS times (default 2, so each node dies once) it kills
// the primary's container (SIGKILL), waits for Patroni to promote the standby, starts
// the killed container again and waits for it to rejoin. Checked:
//
//   - after each failover, every dot acknowledged so far is on the new primary (read
//     there directly), and, once the old primary has rejoined, on it too; a retention
//     run succeeds on the new primary;
//   - no HTTP answer but 200 and 503 with Retry-After (never a 500); no CONNACK refusal
//     but "server unavailable";
//   - writes succeed again within maxUnavailable of the first failure (the window is
//     logged, with its p50 over the failovers);
//   - the subscriber gets values written after each failover (the LISTEN connection
//     found the new primary);
//   - reads that scan values go to the replica again once the old primary is back as a
//     standby (DATABASE_REPLICA_URL names both nodes);
//   - at the end, the stored dots are exactly the acknowledged ones, none twice.
func TestFailover(t *testing.T) {
	if os.Getenv(HAEnv) != "1" {
		t.Skip("kills database containers for minutes: make test-ha runs it (" + HAEnv + "=1)")
	}
	failovers := 2
	if v := os.Getenv("SENSORAPI_FAILOVERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SENSORAPI_FAILOVERS=%q: want a positive number", v)
		}
		failovers = n
	}
	ctx := context.Background()
	cl, err := testcontainers.StartCluster(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Terminate(context.Background()) })
	e, err := testenv.New(ctx, cl.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	dbName := u.Path[1:]
	t.Run("hosts without target_session_attrs", func(t *testing.T) { roleByDefault(t, cl, e, dbName) })
	cfg := e.Config()
	cfg.QueryTimeout = 5 * time.Second // a write stuck on a dead primary gives up then
	cfg.ReplicaURLs = []string{cl.StandbyDSN(dbName)}
	h := e.Serve(t, e.DB, cfg)
	broker, err := h.Server.StartMQTT(config.MQTT{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Close() })
	mqttAddr := broker.Addrs()[0].String()
	t.Run("writes wait for the synchronous standby", func(t *testing.T) { waitsForStandby(t, cl, h) })
	tok := e.NewAccount(t)

	w := &writes{acked: map[dotKey]float64{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(2)
		go func() { defer wg.Done(); w.http(t, h.As(tok), fmt.Sprintf("http-%d", i), stop) }()
		go func() { defer wg.Done(); w.mqtt(t, mqttAddr, tok, fmt.Sprintf("mqtt-%d", i), stop) }()
	}
	sub := subscribe(t, mqttAddr, tok, "/v1.6/devices/http-0/v/lv")

	var windows []time.Duration
	for round := range failovers {
		leader, err := cl.WaitReplicated(ctx, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // writing on a healthy pair
		killed := time.Now()
		if err := leader.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		promoted := waitLeader(t, cl, leader)
		promotedAfter := time.Since(killed)
		firstFail, firstOK := w.recovered(t, killed)
		window := firstOK.Sub(firstFail)
		windows = append(windows, window)
		t.Logf("failover %d: %s killed; %s primary after %v; writes failed from +%v to +%v: unavailable %v",
			round+1, leader.Name, promoted.Name, promotedAfter.Round(time.Millisecond), firstFail.Sub(killed).Round(time.Millisecond),
			firstOK.Sub(killed).Round(time.Millisecond), window.Round(time.Millisecond))
		if late := w.failuresBetween(killed.Add(promotedAfter), firstOK); len(late) > 0 {
			t.Logf("failover %d: failures after the promotion: %v", round+1, late)
		}
		if window > maxUnavailable {
			t.Errorf("failover %d: writes failed for %v, want at most %v", round+1, window, maxUnavailable)
		}
		holds(t, promoted, dbName, tok, w.snapshot(), "the new primary")
		// the retention job records its run on the primary, through the service's pool
		if res, err := (&retention.Job{Pool: e.DB.Pool, Log: e.Log}).Run(ctx); err != nil || res.Skipped {
			t.Errorf("failover %d: retention run on the new primary: %+v, %v", round+1, res, err)
		}
		sub.receives(t, w.ackedAfter(t, "http-0", firstOK), "after failover "+strconv.Itoa(round+1))

		// the old primary rejoins as a standby of the new one
		if err := leader.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.WaitReplicated(ctx, 2*time.Minute); err != nil {
			t.Fatalf("failover %d: %s did not rejoin: %v", round+1, leader.Name, err)
		}
		t.Logf("failover %d: %s streaming as the synchronous standby %v after the kill", round+1, leader.Name,
			time.Since(killed).Round(time.Millisecond))
		holds(t, leader, dbName, tok, w.snapshot(), "the rejoined standby")
		readsOnReplica(t, h, tok)
	}
	close(stop)
	wg.Wait()
	sort := slices.Clone(windows)
	slices.Sort(sort)
	t.Logf("unavailable per failover %v: p50 %v", windows, sort[len(sort)/2])

	stored := storedDots(t, cl.Leader(ctx), dbName, tok)
	acked := w.snapshot()
	for k, v := range acked {
		if got, ok := stored[k]; !ok || got != v {
			t.Errorf("acknowledged dot %v (value %v) stored as %v, %v", k, v, got, ok)
		}
	}
	for k := range stored {
		if _, ok := acked[k]; !ok {
			t.Errorf("dot %v stored but never acknowledged", k)
		}
	}
	t.Logf("%d dots acknowledged, %d stored, %d failed attempts", len(acked), len(stored), w.failures())
}

// dotKey names a dot: device label and timestamp (ms).
type dotKey struct {
	device string
	ts     int64
}

// writes is what the writers saw: every acknowledged dot, and when each attempt
// succeeded or failed.
type writes struct {
	mu       sync.Mutex
	acked    map[dotKey]float64
	last     map[string]ack // the newest acknowledgement per device
	attempts []attempt
}

type attempt struct {
	sent, at time.Time // the write was sent, answered
	ok       bool
	failure  string // what the writer saw instead of an acknowledgement
}

// ack is when a device's write was acknowledged, and its newest timestamp.
type ack struct {
	at time.Time
	ts int64
}

func (w *writes) record(device string, sent time.Time, ts []int64, failure string) {
	ok := failure == ""
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts = append(w.attempts, attempt{sent: sent, at: time.Now(), ok: ok, failure: failure})
	if !ok {
		return
	}
	if w.last == nil {
		w.last = map[string]ack{}
	}
	for _, x := range ts {
		w.acked[dotKey{device, x}] = float64(x)
		w.last[device] = ack{at: time.Now(), ts: x}
	}
}

func (w *writes) snapshot() map[dotKey]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.acked)
}

// ackedAfter waits for device's first acknowledgement after from and returns the
// newest timestamp acknowledged then.
func (w *writes) ackedAfter(t *testing.T, device string, from time.Time) int64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		a := w.last[device]
		w.mu.Unlock()
		if a.at.After(from) {
			return a.ts
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no write acknowledged within 10 s of the others recovering", device)
		}
	}
}

func (w *writes) failures() (n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.attempts {
		if !a.ok {
			n++
		}
	}
	return n
}

// failuresBetween counts the failures answered between from and to, by what they were.
func (w *writes) failuresBetween(from, to time.Time) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string]int{}
	for _, a := range w.attempts {
		if !a.ok && a.at.After(from) && a.at.Before(to) {
			m[a.failure]++
		}
	}
	return m
}

// recovered waits until writes succeed again after the kill and returns the first
// failure after it and the first success of a write sent after that failure (not an
// answer to one sent before the kill that arrived late).
func (w *writes) recovered(t *testing.T, killed time.Time) (firstFail, firstOK time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * maxUnavailable)
	for {
		w.mu.Lock()
		for _, a := range w.attempts {
			if a.at.Before(killed) {
				continue
			}
			if !a.ok && firstFail.IsZero() {
				firstFail = a.at
			}
			if a.ok && !firstFail.IsZero() && a.sent.After(firstFail) {
				firstOK = a.at
				break
			}
		}
		w.mu.Unlock()
		if !firstOK.IsZero() {
			return firstFail, firstOK
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within %v of the kill (first failure %v)", 2*maxUnavailable, firstFail)
		}
		firstFail = time.Time{}
		time.Sleep(100 * time.Millisecond)
	}
}

// http writes two dots a request to device, each request sent again until it is
// acknowledged, until stop closes.
func (w *writes) http(t *testing.T, c *testenv.Client, device string, stop <-chan struct{}) {
	for ts := int64(1); ; ts += 2 {
		body := map[string]any{"v": []map[string]any{{"value": ts, "timestamp": ts}, {"value": ts + 1, "timestamp": ts + 1}}}
		for {
			sent := time.Now()
			r := c.Post("/api/v1.6/devices/"+device+"/", body)
			if r.Status == 200 {
				w.record(device, sent, []int64{ts, ts + 1}, "")
				break
			}
			if r.Status != 503 || r.Header.Get("Retry-After") == "" {
				t.Errorf("%s: %d %s (Retry-After %q), want 200 or 503 with Retry-After", device, r.Status, r.Body, r.Header.Get("Retry-After"))
			}
			w.record(device, sent, nil, fmt.Sprintf("HTTP %d %s", r.Status, r.Body))
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// mqtt publishes one dot at a time to device (QoS 1, paho), reconnecting and sending
// it again until it is acknowledged, until stop closes.
func (w *writes) mqtt(t *testing.T, addr, tok, device string, stop <-chan struct{}) {
	var c paho.Client
	defer func() {
		if c != nil {
			c.Disconnect(100)
		}
	}()
	for ts := int64(1); ; ts++ {
		for {
			sent := time.Now()
			var err error
			if c == nil || !c.IsConnected() {
				c, err = dial(t, addr, tok, device)
			}
			if err == nil {
				if err = publish(c, device, ts); err == nil {
					w.record(device, sent, []int64{ts}, "")
					break
				}
			}
			w.record(device, sent, nil, "MQTT "+err.Error())
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// dial connects a paho (MQTT 3.1.1) client; an error when the broker refused for now.
func dial(t *testing.T, addr, tok, device string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(tok).
		SetClientID(device + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)).
		SetConnectTimeout(10 * time.Second).SetAutoReconnect(false)
	c := paho.NewClient(o)
	tk := c.Connect()
	if !tk.WaitTimeout(15 * time.Second) {
		t.Errorf("%s: no CONNACK within 15 s", device)
		return nil, errors.New("no CONNACK")
	}
	if err := tk.Error(); err != nil {
		// the token is checked against the database while the caches cannot be trusted
		if !errors.Is(err, packets.ErrorRefusedServerUnavailable) {
			t.Errorf("%s: connect: %v, want success or \"server unavailable\"", device, err)
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}

// publish sends the dot (value ts at ts) and returns nil once it is acknowledged: the
// broker closes the connection instead of acknowledging a write it could not commit.
func publish(c paho.Client, device string, ts int64) error {
	tk := c.Publish("/v1.6/devices/"+device+"/v", 1, false, fmt.Sprintf(`{"value":%d,"timestamp":%d}`, ts, ts))
	if !tk.WaitTimeout(20 * time.Second) {
		c.Disconnect(0)
		return errors.New("no PUBACK within 20 s")
	}
	if err := tk.Error(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// subscriber records the newest last value an MQTT subscription delivered.
type subscriber struct {
	mu     sync.Mutex
	newest float64
}

func subscribe(t *testing.T, addr, tok, filter string) *subscriber {
	t.Helper()
	s := &subscriber{newest: -1}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(tok).SetClientID("ha-subscriber").
		SetAutoReconnect(false).SetConnectionLostHandler(func(_ paho.Client, err error) {
		t.Errorf("the subscriber lost its connection: %v", err)
	})
	c := paho.NewClient(o)
	if tk := c.Connect(); !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("subscriber: connect: %v", tk.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	tk := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		v, err := strconv.ParseFloat(string(m.Payload()), 64)
		if err != nil {
			t.Errorf("subscriber: %s %q", m.Topic(), m.Payload())
			return
		}
		s.mu.Lock()
		s.newest = max(s.newest, v)
		s.mu.Unlock()
	})
	if !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tk.Error())
	}
	return s
}

// receives waits up to 10 s for a delivery of at least v (the writers of http-0 write
// value = timestamp, increasing).
func (s *subscriber) receives(t *testing.T, v int64, when string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		got := s.newest
		s.mu.Unlock()
		if got >= float64(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the subscriber's newest value is %v, want at least %d (acknowledged)", when, got, v)
			return
		}
	}
}

// waitLeader waits for a node other than old to be the primary.
func waitLeader(t *testing.T, cl *testcontainers.Cluster, old *testcontainers.Node) *testcontainers.Node {
	t.Helper()
	for deadline := time.Now().Add(2 * maxUnavailable); ; time.Sleep(100 * time.Millisecond) {
		if n := cl.Leader(context.Background()); n != nil && n != old {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no standby promoted within %v of killing %s", 2*maxUnavailable, old.Name)
		}
	}
}

// holds checks that node has every acknowledged dot; a standby may be a moment
// behind in replaying them (synchronous_commit = on waits for its flush, not its
// replay), so it has 10 s.
func holds(t *testing.T, node *testcontainers.Node, db, tok string, acked map[dotKey]float64, what string) {
	t.Helper()
	var missing []dotKey
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		stored := storedDots(t, node, db, tok)
		missing = missing[:0]
		for k, v := range acked {
			if got, ok := stored[k]; !ok || got != v {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			t.Logf("%s (%s) holds all %d dots acknowledged so far", what, node.Name, len(acked))
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s (%s) lacks %d of the %d acknowledged dots, e.g. %v", what, node.Name, len(missing), len(acked), missing[0])
			return
		}
	}
}

// storedDots reads the account's dots on one node, failing on a dot stored twice.
func storedDots(t *testing.T, node *testcontainers.Node, db, tok string) map[dotKey]float64 {
	t.Helper()
	if node == nil {
		t.Fatal("no primary to read from")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, node.DSN(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", node.Name, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	rows, err := conn.Query(ctx, `SELECT d.label, (extract(epoch FROM v.ts) * 1000)::bigint, v.value
		FROM "values" v JOIN variables x ON x.id = v.variable_id JOIN devices d ON d.id = x.device_id
		WHERE d.account_id = (SELECT account_id FROM tokens WHERE hash = sha256(convert_to($1, 'UTF8')))`, tok)
	if err != nil {
		t.Fatalf("read the dots on %s: %v", node.Name, err)
	}
	m := map[dotKey]float64{}
	var k dotKey
	var v float64
	_, err = pgx.ForEachRow(rows, []any{&k.device, &k.ts, &v}, func() error {
		if _, dup := m[k]; dup {
			t.Errorf("dot %v stored twice on %s", k, node.Name)
		}
		m[k] = v
		return nil
	})
	if err != nil {
		t.Fatalf("read the dots on %s: %v", node.Name, err)
	}
	return m
}

// readsOnReplica checks that value lists are read on the replica (the standby that
// DATABASE_REPLICA_URL finds among both nodes) within 15 s.
func readsOnReplica(t *testing.T, h *testenv.Client, tok string) {
	t.Helper()
	onReplica := func() float64 { return testutil.ToFloat64(h.Server.Replicas.Reads().WithLabelValues("replica-0")) }
	before := onReplica()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r := h.As(tok).Get("/api/v1.6/devices/http-0/v/values?page_size=1"); r.Status != 200 {
			t.Errorf("value list: %d %s", r.Status, r.Body)
		}
		if onReplica() > before {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("no value list read on the replica within 15 s of the standby rejoining; /readyz: %s", h.Get("/readyz").Body)
			return
		}
	}
}

// roleByDefault: a DSN naming several hosts without target_session_attrs gives the
// primary's pool (DATABASE_URL) the primary even when the standby comes first, and the
// replicas' pool (DATABASE_REPLICA_URL) the standby even when the primary comes first;
// pgx alone would take the first that answers.
func roleByDefault(t *testing.T, cl *testcontainers.Cluster, e *testenv.Env, db string) {
	ctx := context.Background()
	leader := cl.Leader(ctx)
	var standby *testcontainers.Node
	for _, n := range cl.Nodes {
		if n != leader {
			standby = n
		}
	}
	hosts := func(first, second *testcontainers.Node) string {
		return fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable", first.Port, second.Port, db)
	}
	dsn := hosts(standby, leader)
	inRecovery := func(db *store.DB) bool {
		var r bool
		if err := db.Pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	primary, err := store.Open(ctx, dsn, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = primary.Close() }()
	if inRecovery(primary) {
		t.Errorf("DATABASE_URL=%s: the pool connected to the standby", dsn)
	}
	dsn = hosts(leader, standby)
	replicas, err := store.NewReplicas(e.DB, []string{dsn}, time.Second, time.Minute, prometheus.NewRegistry(), e.Log)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); replicas.Run(rctx) }() // Run closes the replicas when rctx ends
	defer func() { cancel(); <-ran }()
	for deadline := time.Now().Add(5 * time.Second); !replicas.Status()[0]["up"].(bool); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DATABASE_REPLICA_URL=%s: the replica is not up: %v", dsn, replicas.Status())
		}
	}
}

// waitsForStandby: with the synchronous standby frozen, a write is not acknowledged
// (its commit waits for the standby's flush; the service gives up after its query
// timeout with a 503, closing the connection rather than cancelling the wait, which
// PostgreSQL would answer with a successful COMMIT); once the standby resumes, writes
// are acknowledged again.
func waitsForStandby(t *testing.T, cl *testcontainers.Cluster, h *testenv.Client) {
	ctx := context.Background()
	leader := cl.Leader(ctx)
	var standby *testcontainers.Node
	for _, n := range cl.Nodes {
		if n != leader {
			standby = n
		}
	}
	write := func(ts int64) testenv.Response {
		return h.Post("/api/v1.6/devices/sync-check/", map[string]any{"v": map[string]any{"value": ts, "timestamp": ts}})
	}
	if r := write(1); r.Status != 200 {
		t.Fatalf("write before the pause: %d %s", r.Status, r.Body)
	}
	if err := standby.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	r := write(2)
	took := time.Since(begin)
	if err := standby.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Status != 503 || r.Header.Get("Retry-After") == "" {
		t.Errorf("write while the synchronous standby was frozen: %d %s after %v, want 503 with Retry-After", r.Status, r.Body, took)
	}
	t.Logf("write while the synchronous standby was frozen: %d after %v", r.Status, took.Round(time.Millisecond))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := write(3); r.Status == 200 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("write after the standby resumed: %d %s", r.Status, r.Body)
		}
	}
}
