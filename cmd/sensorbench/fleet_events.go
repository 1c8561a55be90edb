package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// fleetEvents is how many active events the fleet benchmark creates over its devices'
// temperature variables (flag -fleet-events, or SENSORAPI_BENCH_FLEET_EVENTS): the cost
// of evaluating conditions on every write. Each side is then measured twice in the same
// run, on two accounts of the same fleet, one without events and one with, in
// alternating slices (fleetSideEvents), and the ratio printed (docs/events.md "Cost"). Each event triggers above 99
// (about 1% of the fleet's values) and is back to normal below it, with a webhook to
// a receiver in this process for both transitions.
var fleetEvents int

// fleetEventsDefault reads SENSORAPI_BENCH_FLEET_EVENTS (0 when unset or invalid).
func fleetEventsDefault() int {
	n, _ := strconv.Atoi(os.Getenv("SENSORAPI_BENCH_FLEET_EVENTS"))
	return max(n, 0)
}

// eventReceiver counts webhooks and how long after its value's timestamp each came:
// the fleet stamps values with the clock (nextTS), so that is write → webhook, the
// latency API.md §18 bounds (p99 within 1 s).
type eventReceiver struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	lat  []time.Duration
}

func newEventReceiver() *eventReceiver {
	r := &eventReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		var b struct{ TS int64 }
		if err := json.NewDecoder(req.Body).Decode(&b); err == nil && b.TS > 0 {
			r.mu.Lock()
			r.lat = append(r.lat, time.Since(time.UnixMilli(b.TS)))
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return r
}

// latency is the p50 and p99 of the webhooks' write → arrival times.
func (r *eventReceiver) latency() (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0, 0
	}
	slices.Sort(r.lat)
	return r.lat[len(r.lat)/2], r.lat[len(r.lat)*99/100]
}

// webhookBody carries the value's timestamp, for the receiver's latency.
const webhookBody = `{"ts":{{timestamp}}}`

// createFleetEvents creates n events on fleet-<i>.temperature (i < n) for the token's
// account, webhooks to rcv.
func createFleetEvents(ctx context.Context, url, tok string, n int, rcv *eventReceiver) error {
	c := &loadgen.Client{HTTP: &http.Client{}, URL: url, Token: tok}
	for i := range n {
		dev := i % fleetDevices
		body := fmt.Appendf(nil, `{"label":"hot-%d","condition":{"variable":"fleet-%d.temperature","operator":">","value":99},`+
			`"actions":[{"type":"webhook","url":%q,"body":%q}],"backToNormal":[{"type":"webhook","url":%q,"body":%q}]}`,
			i, dev, rcv.srv.URL+"/hook", webhookBody, rcv.srv.URL+"/hook", webhookBody)
		if err := c.Do(ctx, http.MethodPost, "/api/v2.0/events/", body); err != nil {
			return fmt.Errorf("create event %d: %w", i, err)
		}
	}
	return nil
}

// fleetEventRounds is how many slices each half of a side with events runs, the two
// halves alternating without, with, with, without, … so that a drift of the machine's
// load or of the tables' size over the run falls on both alike.
const fleetEventRounds = 4

// sideTotal adds up the slices of one half.
type sideTotal struct {
	res fleetResult
	wal int64
}

func (t *sideTotal) add(r *fleetResult, wal int64) {
	t.res.messages += r.messages
	t.res.errors += r.errors
	t.res.elapsed += r.elapsed
	t.res.latencies = append(t.res.latencies, r.latencies...)
	t.wal += wal
}

// fleetSideEvents measures a side without events and with fleetEvents active events, on
// two accounts with the same devices, in alternating slices of d/fleetEventRounds each
// (d per half in all); then the ceiling once.
func fleetSideEvents(ctx context.Context, h *benchharness.Harness, d time.Duration, f floors, ceil *ceiling, name string, mk sender) error {
	plainAcct, plainTok, err := newFleetAccount(ctx, h, "fleet_"+name+"_plain")
	if err != nil {
		return err
	}
	evAcct, evTok, err := newFleetAccount(ctx, h, "fleet_"+name+"_events")
	if err != nil {
		return err
	}
	rcv := newEventReceiver()
	defer rcv.srv.Close()
	if err := createFleetEvents(ctx, h.URL, evTok, fleetEvents, rcv); err != nil {
		return err
	}
	fmt.Printf("  %s: %d events created; measuring\n", name, fleetEvents)
	var plain, withEvents sideTotal
	var label string
	var peak float64
	slice := d / fleetEventRounds
	for r := range fleetEventRounds {
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, events := range order {
			tok, total := plainTok, &plain
			if events {
				tok, total = evTok, &withEvents
			}
			before, err := walLSN(ctx, h)
			if err != nil {
				return err
			}
			res, l, p, err := runSide(ctx, h, slice, mk, h.URL, h.MQTT, tok)
			if err != nil {
				return err
			}
			after, err := walLSN(ctx, h)
			if err != nil {
				return err
			}
			total.add(res, after-before)
			label, peak = l, max(peak, p)
		}
	}
	slices.Sort(plain.res.latencies)
	slices.Sort(withEvents.res.latencies)
	top, _, _, err := runSide(ctx, nil, d, mk, ceil.url, ceil.mqtt, plainTok)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	fmt.Printf("  %s, %d alternating slices of %v each without and with %d active events:\n", label, fleetEventRounds, slice, fleetEvents)
	printFleet("  without events", &plain.res)
	printFleet(fmt.Sprintf("  with %d active events", fleetEvents), &withEvents.res)
	printFleet("  ceiling: parse and discard, no database", top)
	for _, s := range []struct {
		name string
		t    *sideTotal
	}{{"without events", &plain}, {"with events", &withEvents}} {
		fmt.Printf("  %s %s / naive floor: %.2f×   / service path 1 msg/tx: %.2f×   / ceiling: %.0f%%   WAL %.0f B/message\n",
			name, s.name, s.t.res.rate()/f.naive.rate(), s.t.res.rate()/f.path.rate(), 100*s.t.res.rate()/top.rate(),
			float64(s.t.wal)/float64(max(s.t.res.messages, 1)))
	}
	ratio := withEvents.res.rate() / plain.res.rate()
	p50, p99 := rcv.latency()
	fmt.Printf("  with events / without: %.3f (%+.1f%%; target within 10%%)   webhooks received %d (write → webhook p50 %v, p99 %v; target p99 ≤ 1 s)   server peak RSS %.0f MiB\n",
		ratio, 100*(ratio-1), rcv.hits.Load(), p50.Round(time.Millisecond), p99.Round(time.Millisecond), peak)
	if err := checkStored(ctx, h, name+" without events", plainAcct, &plain.res, fleetDevices); err != nil {
		return err
	}
	return checkStored(ctx, h, name+" with events", evAcct, &withEvents.res, fleetDevices)
}
