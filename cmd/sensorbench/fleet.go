package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sensordata/sensorapi/pkg/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
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

// benchFleet measures (a) the per-message floor: fleetFloorConns connections each
// committing one transaction per message with the service's own statements, and
// (b) fleetHTTPClients clients posting the same messages through HTTP, each for d.
func benchFleet(ctx context.Context, h *benchharness.Harness, d time.Duration) error {
	floor, err := fleetFloor(ctx, h, d)
	if err != nil {
		return fmt.Errorf("fleet floor: %w", err)
	}
	acct, tok, err := h.NewAccount(ctx, "fleet_http")
	if err != nil {
		return err
	}
	client := &loadgen.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: fleetHTTPClients}},
		URL: h.URL, Token: tok}
	post := func(ctx context.Context, dev int, ts int64) error {
		return client.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1.6/devices/fleet-%d/", dev), fleetMessage(ts))
	}
	for dev := range fleetDevices { // the fleet exists before it is measured
		if err := post(ctx, dev, 0); err != nil {
			return err
		}
	}
	rss := h.SampleRSS()
	viaHTTP := runFleet(ctx, fleetHTTPClients, d, post)
	peak := rss.Stop()
	stored, err := storedDots(ctx, h, acct)
	if err != nil {
		return err
	}
	stored -= int64(fleetDevices * len(fleetVariables)) // the warm-up messages
	acked := viaHTTP.messages * int64(len(fleetVariables))

	fmt.Printf("fleet ingestion: %d devices, %d-dot messages, %v per side\n", fleetDevices, len(fleetVariables), d)
	printFleet(fmt.Sprintf("floor (%d pgx conns, 1 tx/message)", fleetFloorConns), floor)
	printFleet(fmt.Sprintf("HTTP  (%d clients, POST /api/v1.6/devices/<label>/)", fleetHTTPClients), viaHTTP)
	fmt.Printf("  HTTP / floor: %.2f×   (targets: ≥ 1.5× the floor, p99 ≤ 100 ms, 0 errors)\n", viaHTTP.rate()/floor.rate())
	fmt.Printf("  dots stored %d, acknowledged %d (target: equal)\n", stored, acked)
	fmt.Printf("  server peak RSS %.0f MiB (target < 256 MiB)\n\n", peak)
	if stored != acked {
		return fmt.Errorf("fleet: %d dots stored but %d acknowledged", stored, acked)
	}
	return nil
}

// fleetFloor runs the per-message floor on devices created up front in an account of
// its own.
func fleetFloor(ctx context.Context, h *benchharness.Harness, d time.Duration) (*fleetResult, error) {
	acct, _, err := h.NewAccount(ctx, "fleet_floor")
	if err != nil {
		return nil, err
	}
	st := &ingest.Store{Pool: h.DB.Pool}
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
	return runFleet(ctx, fleetFloorConns, d, func(ctx context.Context, dev int, ts int64) error {
		return st.WriteResolved(ctx, devs[dev], fmt.Sprintf("fleet-%d", dev), keys[dev], fleetDots(ts))
	}), nil
}

// runFleet runs workers sending messages to random-ish devices for d; each message
// carries a timestamp no other message has.
func runFleet(ctx context.Context, workers int, d time.Duration, send func(ctx context.Context, dev int, ts int64) error) *fleetResult {
	var (
		res   fleetResult
		next  atomic.Int64
		mu    sync.Mutex
		wg    sync.WaitGroup
		until = time.Now().Add(d)
	)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for dev := w; time.Now().Before(until) && ctx.Err() == nil; dev = (dev + workers + 1) % fleetDevices {
				ts := next.Add(1)
				t0 := time.Now()
				if err := send(ctx, dev, ts); err != nil {
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
	res.elapsed = time.Since(start)
	res.messages = int64(len(res.latencies))
	slices.Sort(res.latencies)
	return &res
}

func printFleet(name string, r *fleetResult) {
	fmt.Printf("  %-52s %8.0f msg/s   p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  errors %d\n", name, r.rate(),
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

// storedDots counts the values of an account.
func storedDots(ctx context.Context, h *benchharness.Harness, acct int64) (int64, error) {
	var n int64
	err := h.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM "values"
		WHERE variable_id IN (SELECT id FROM variables WHERE account_id = $1)`, acct).Scan(&n)
	return n, err
}
