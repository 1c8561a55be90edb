package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/values"
)

// The fleet workload (issue "fleet ingestion"): many devices each sending one small
// message, {"temperature": x, "humidity": y}, rather than bulk batches.
const (
	fleetDevices     = 1000
	fleetFloorConns  = 32 // plain pgx connections, one transaction per message
	fleetHTTPClients = 64 // one request in flight each
)

var fleetVariables = []string{"temperature", "humidity"}

// fleetResult is one side's run.
type fleetResult struct {
	messages  int64
	errors    int64
	latencies []time.Duration // of acknowledged messages
	elapsed   time.Duration
}

func (r *fleetResult) rate() float64 { return float64(r.messages) / r.elapsed.Seconds() }

// quantile of the sorted latencies.
func (r *fleetResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

// benchFleet measures the same small messages (fleetDevices devices, one 2-dot
// message each at a time) four ways, each for d:
//   - the naive floor: what a user would write instead of this service, fleetFloorConns
//     pgx connections each committing one transaction per message (naiveFloor);
//   - the service's own write path, one message per transaction (servicePathFloor): what
//     group commit saves;
//   - the service over HTTP and over MQTT (QoS 1, PUBACK awaited);
//   - the ceiling: the same load against a process that parses each message and
//     discards it (no database), so the service's rate can be read as a share of what
//     the box and the load generator allow.
func benchFleet(ctx context.Context, h *benchharness.Harness, d time.Duration, viaHTTP, viaMQTT bool) error {
	naive, err := naiveFloor(ctx, h, d)
	if err != nil {
		return fmt.Errorf("fleet naive floor: %w", err)
	}
	path, err := servicePathFloor(ctx, h, d)
	if err != nil {
		return fmt.Errorf("fleet floor: %w", err)
	}
	fmt.Printf("fleet ingestion: %d devices, %d-dot messages, %v per side\n", fleetDevices, len(fleetVariables), d)
	printFleet(fmt.Sprintf("naive floor (%d pgx conns, INSERT+UPDATE/tx)", fleetFloorConns), naive)
	printFleet(fmt.Sprintf("service path, 1 message/tx (%d conns)", fleetFloorConns), path)
	ceil, err := startCeiling(ctx)
	if err != nil {
		return err
	}
	defer ceil.close()
	floors := floors{naive: naive, path: path}
	if viaHTTP {
		if err := fleetSide(ctx, h, d, floors, ceil, "http", fleetHTTP); err != nil {
			return err
		}
	}
	if viaMQTT {
		if err := fleetSide(ctx, h, d, floors, ceil, "mqtt", fleetMQTT); err != nil {
			return err
		}
		if err := idleMQTT(h); err != nil {
			return err
		}
	}
	if err := checkRollups(ctx, h); err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// checkRollups runs `sensorapi rollups check` over everything the sides wrote: group
// commit must leave every tile equal to its values.
func checkRollups(ctx context.Context, h *benchharness.Harness) error {
	cmd := exec.CommandContext(ctx, h.Bin, "rollups", "check")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+h.DSN)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("sensorapi rollups check: %w: %s", err, out)
	}
	fmt.Printf("  sensorapi rollups check: %s", out)
	return nil
}

// floors are the two per-message floors a side is compared with.
type floors struct{ naive, path *fleetResult }

// sender makes the send function of a side's workers for an account's token, and a
// function that closes what it opened.
type sender func(ctx context.Context, url, mqttAddr, tok string) (send func(ctx context.Context, w, dev int, ts int64) error, closeAll func(), name string, err error)

// fleetSide runs one side on an account of its own whose devices exist already, and
// checks that every acknowledged dot is stored; then the same load against the ceiling.
// With synthetic variables or events it measures the side with and without them in
// the same run instead (fleetSyntheticSides, fleetSideEvents).
func fleetSide(ctx context.Context, h *benchharness.Harness, d time.Duration, f floors, ceil *ceiling, name string, mk sender) error {
	switch {
	case fleetSynthetic:
		return fleetSyntheticSides(ctx, h, d, f, ceil, name, mk)
	case fleetEvents > 0:
		return fleetSideEvents(ctx, h, d, f, ceil, name, mk)
	}
	cold, err := coldSide(ctx, h, d, name, mk)
	if err != nil {
		return err
	}
	acct, tok, err := newFleetAccount(ctx, h, "fleet_"+name)
	if err != nil {
		return err
	}
	walBefore, err := walLSN(ctx, h)
	if err != nil {
		return err
	}
	res, label, peak, err := runSide(ctx, h, d, mk, h.URL, h.MQTT, tok)
	if err != nil {
		return err
	}
	walAfter, err := walLSN(ctx, h)
	if err != nil {
		return err
	}
	top, _, _, err := runSide(ctx, nil, d, mk, ceil.url, ceil.mqtt, tok)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	printFleet(label, res)
	printFleet("  ceiling: parse and discard, no database", top)
	fmt.Printf("  %s / naive floor: %.2f×   / service path 1 msg/tx: %.2f×   / ceiling: %.0f%%\n",
		name, res.rate()/f.naive.rate(), res.rate()/f.path.rate(), 100*res.rate()/top.rate())
	fmt.Printf("  server peak RSS %.0f MiB   WAL %.0f B/message\n", peak,
		float64(walAfter-walBefore)/float64(max(res.messages, 1)))
	fmt.Printf("  %s fresh account / established: %.2f×   p99 %.1f ms / %.1f ms\n", name,
		cold.rate()/res.rate(), ms(cold.quantile(0.99)), ms(res.quantile(0.99)))
	return checkStored(ctx, h, name, acct, res, fleetDevices)
}

// coldSide runs a side on a fresh account from its first message: the measured
// messages create its devices and variables, as when a new fleet first connects (an
// operator's first look at the product). The established side that follows runs on
// devices that exist already.
func coldSide(ctx context.Context, h *benchharness.Harness, d time.Duration, name string, mk sender) (*fleetResult, error) {
	acct, tok, err := h.NewAccount(ctx, "fleet_"+name+"_fresh")
	if err != nil {
		return nil, err
	}
	res, _, _, err := runSide(ctx, h, d, mk, h.URL, h.MQTT, tok)
	if err != nil {
		return nil, err
	}
	printFleet("  fresh account, from its first message", res)
	return res, checkStored(ctx, h, name+" fresh", acct, res, 0)
}

// checkStored fails when the account does not hold every acknowledged dot of res and
// of its warm-up messages (one per device of warmed devices).
func checkStored(ctx context.Context, h *benchharness.Harness, name string, acct int64, res *fleetResult, warmed int) error {
	stored, err := storedDots(ctx, h, acct)
	if err != nil {
		return err
	}
	stored -= int64(warmed * len(fleetVariables))
	acked := res.messages * int64(len(fleetVariables))
	fmt.Printf("  %s: dots stored %d, acknowledged %d\n", name, stored, acked)
	if stored != acked {
		return fmt.Errorf("fleet %s: %d dots stored but %d acknowledged", name, stored, acked)
	}
	return nil
}

// newFleetAccount makes an account whose fleetDevices devices exist, each with one
// value (timestamp 0) on each variable.
func newFleetAccount(ctx context.Context, h *benchharness.Harness, name string) (int64, string, error) {
	acct, tok, err := h.NewAccount(ctx, name)
	if err != nil {
		return 0, "", err
	}
	warm, _, _, err := fleetHTTP(ctx, h.URL, h.MQTT, tok)
	if err != nil {
		return 0, "", err
	}
	for dev := range fleetDevices { // the fleet exists before it is measured
		if err := warm(ctx, 0, dev, 0); err != nil {
			return 0, "", err
		}
	}
	return acct, tok, nil
}

// runSide runs the fleet load through the sender made for url/mqttAddr, sampling the
// harness server's memory when h is given.
func runSide(ctx context.Context, h *benchharness.Harness, d time.Duration, mk sender, url, mqttAddr, tok string) (*fleetResult, string, float64, error) {
	send, closeAll, label, err := mk(ctx, url, mqttAddr, tok)
	if err != nil {
		return nil, "", 0, err
	}
	defer closeAll()
	var rss *benchharness.RSSSampler
	if h != nil {
		rss = h.SampleRSS()
	}
	res := runFleet(ctx, fleetHTTPClients, d, send)
	peak := 0.0
	if rss != nil {
		peak = rss.Stop()
	}
	return res, label, peak, nil
}

// fleetHTTP posts each message to /api/v1.6/devices/<label>/.
func fleetHTTP(_ context.Context, url, _, tok string) (func(context.Context, int, int, int64) error, func(), string, error) {
	client := &loadgen.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: fleetHTTPClients}},
		URL: url, Token: tok}
	send := func(ctx context.Context, _, dev int, ts int64) error {
		return client.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1.6/devices/fleet-%d/", dev), fleetMessage(ts))
	}
	return send, func() {}, fmt.Sprintf("HTTP (%d clients, POST /api/v1.6/devices/<label>/)", fleetHTTPClients), nil
}

// fleetMQTT publishes each message at QoS 1 to /v1.6/devices/<label> from one paho
// connection per worker, waiting for its PUBACK.
func fleetMQTT(_ context.Context, _, mqttAddr, tok string) (func(context.Context, int, int, int64) error, func(), string, error) {
	clients := make([]paho.Client, fleetHTTPClients)
	closeAll := func() {
		for _, c := range clients {
			if c != nil {
				c.Disconnect(100)
			}
		}
	}
	for i := range clients {
		c, err := mqttConnect(mqttAddr, tok, fmt.Sprintf("fleet-%d", i))
		if err != nil {
			closeAll()
			return nil, nil, "", err
		}
		clients[i] = c
	}
	send := func(_ context.Context, w, dev int, ts int64) error {
		tk := clients[w].Publish(fmt.Sprintf("/v1.6/devices/fleet-%d", dev), 1, false, fleetMessage(ts))
		if !tk.WaitTimeout(30 * time.Second) {
			return fmt.Errorf("no PUBACK in 30 s")
		}
		return tk.Error()
	}
	return send, closeAll, fmt.Sprintf("MQTT (%d connections, QoS 1, PUBACK awaited)", fleetHTTPClients), nil
}

func mqttConnect(addr, tok, id string) (paho.Client, error) {
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(tok).SetClientID(id).
		SetAutoReconnect(false).SetConnectTimeout(10 * time.Second))
	if tk := c.Connect(); !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		return nil, fmt.Errorf("mqtt connect %s: %w", id, tk.Error())
	}
	return c, nil
}

// idleMQTT opens fleetDevices idle connections and reports the server's memory.
func idleMQTT(h *benchharness.Harness) error {
	var clients []paho.Client
	defer func() {
		for _, c := range clients {
			c.Disconnect(0)
		}
	}()
	for i := range fleetDevices {
		c, err := mqttConnect(h.MQTT, h.Token, fmt.Sprintf("idle-%d", i))
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	time.Sleep(time.Second)
	fmt.Printf("  server RSS with %d idle MQTT connections open: %.0f MiB (target < 256 MiB)\n",
		len(clients), float64(benchharness.RSSKiB(h.Server.Process.Pid))/1024)
	return nil
}

// servicePathFloor runs the service's own write path one message per transaction (no
// group commit, the same statements and triggers) on devices created up front in an
// account of its own.
func servicePathFloor(ctx context.Context, h *benchharness.Harness, d time.Duration) (*fleetResult, error) {
	acct, _, err := h.NewAccount(ctx, "fleet_floor")
	if err != nil {
		return nil, err
	}
	st := ingest.Direct(&values.Store{Pool: h.DB.Pool})
	keys := make([]map[string]int64, fleetDevices)
	devs := make([]int64, fleetDevices)
	for dev := range fleetDevices {
		label := fmt.Sprintf("fleet-%d", dev)
		if err := st.ToDevice(ctx, acct, label, fleetDots(0)); err != nil {
			return nil, err
		}
		if devs[dev], keys[dev], err = deviceKeys(ctx, h, acct, label); err != nil {
			return nil, err
		}
	}
	return runFleet(ctx, fleetFloorConns, d, func(ctx context.Context, _, dev int, ts int64) error {
		return st.WriteResolved(ctx, devs[dev], fmt.Sprintf("fleet-%d", dev), keys[dev], fleetDots(ts))
	}), nil
}

// deviceTS is the last timestamp (ms) each fleet device sent. A device stamps its
// message with its clock, as a fleet does (or leaves it to the server's): now, or 1 ms
// after its previous message when that was in the same millisecond, so that no two of
// its messages share one, also across the synthetic comparison's rounds.
var deviceTS [fleetDevices]atomic.Int64

// nextTS is device dev's timestamp for its next message.
func nextTS(dev int) int64 {
	for {
		prev := deviceTS[dev].Load()
		ts := max(time.Now().UnixMilli(), prev+1)
		if deviceTS[dev].CompareAndSwap(prev, ts) {
			return ts
		}
	}
}

// runFleet runs workers sending messages to random-ish devices for d, each stamped by
// its device (nextTS).
func runFleet(ctx context.Context, workers int, d time.Duration, send func(ctx context.Context, w, dev int, ts int64) error) *fleetResult {
	return runTimed(ctx, workers, d, func(w int) func(context.Context) error {
		dev := w
		return func(ctx context.Context) error {
			err := send(ctx, w, dev, nextTS(dev))
			dev = (dev + workers + 1) % fleetDevices
			return err
		}
	})
}

// runTimed runs workers for d, each calling its own request function (made by
// worker(w)) one call after the other, and collects the latencies of the calls that
// succeeded.
func runTimed(ctx context.Context, workers int, d time.Duration, worker func(w int) func(context.Context) error) *fleetResult {
	var (
		res   fleetResult
		mu    sync.Mutex
		wg    sync.WaitGroup
		until = time.Now().Add(d)
	)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		do := worker(w)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for time.Now().Before(until) && ctx.Err() == nil {
				t0 := time.Now()
				if err := do(ctx); err != nil {
					atomic.AddInt64(&res.errors, 1)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res.done(start)
}

// done closes a run that started at start: its time, count and sorted latencies.
func (r *fleetResult) done(start time.Time) *fleetResult {
	r.elapsed = time.Since(start)
	r.messages = int64(len(r.latencies))
	slices.Sort(r.latencies)
	return r
}

func printFleet(name string, r *fleetResult) {
	fmt.Printf("  %-54s %8.0f msg/s   p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  errors %d\n", name, r.rate(),
		ms(r.quantile(0.5)), ms(r.quantile(0.99)), ms(r.quantile(1)), r.errors)
}

// fleetDots is one message: each variable gets a value at ts (ms).
func fleetDots(ts int64) []ingest.Dot {
	dots := make([]ingest.Dot, len(fleetVariables))
	for i, v := range fleetVariables {
		dots[i] = ingest.Dot{Target: v, Value: float64(ts%1000) / 10, TS: ts}
	}
	return dots
}

// fleetMessage is fleetDots as the HTTP body.
func fleetMessage(ts int64) []byte {
	return fmt.Appendf(nil, `{"temperature":{"value":%g,"timestamp":%d},"humidity":{"value":%g,"timestamp":%d}}`,
		float64(ts%1000)/10, ts, float64(ts%1000)/10, ts)
}

// deviceKeys reads a device's key and its variables' keys by label.
func deviceKeys(ctx context.Context, h *benchharness.Harness, acct int64, label string) (int64, map[string]int64, error) {
	rows, err := h.DB.Pool.Query(ctx, `SELECT d.id, v.id, v.label FROM devices d JOIN variables v ON v.device_id = d.id
		WHERE d.account_id = $1 AND d.label = $2`, acct, label)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var dev int64
	vars := map[string]int64{}
	for rows.Next() {
		var id int64
		var l string
		if err := rows.Scan(&dev, &id, &l); err != nil {
			return 0, nil, err
		}
		vars[l] = id
	}
	return dev, vars, rows.Err()
}

// storedDots counts the raw values of an account (synthetic ones are computed, not acknowledged).
func storedDots(ctx context.Context, h *benchharness.Harness, acct int64) (int64, error) {
	var n int64
	err := h.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM "values"
		WHERE variable_id IN (SELECT id FROM variables WHERE account_id = $1 AND synthetic_expression = '')`, acct).Scan(&n)
	return n, err
}

// walLSN is the database's current WAL position in bytes: WAL written per message is
// a measure of the write path's cost that other load on the machine does not move.
func walLSN(ctx context.Context, h *benchharness.Harness) (int64, error) {
	var n int64
	err := h.DB.Pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
	return n, err
}
