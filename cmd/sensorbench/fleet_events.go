package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// fleetEvents is how many active events the fleet benchmark creates over its devices'
// temperature variables before each measured side (flag -fleet-events, or
// SENSORAPI_BENCH_FLEET_EVENTS): the cost of evaluating conditions on every write,
// compared with a run without (docs/events.md "Cost"). Each event triggers above 99
// (about 1% of the fleet's values) and is back to normal below it, with a webhook to
// a receiver in this process for both transitions.
var fleetEvents int

// fleetEventsDefault reads SENSORAPI_BENCH_FLEET_EVENTS (0 when unset or invalid).
func fleetEventsDefault() int {
	n, _ := strconv.Atoi(os.Getenv("SENSORAPI_BENCH_FLEET_EVENTS"))
	return max(n, 0)
}

// eventReceiver counts webhooks.
type eventReceiver struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newEventReceiver() *eventReceiver {
	r := &eventReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	return r
}

// createFleetEvents creates n events on fleet-<i>.temperature (i < n) for the token's
// account, webhooks to rcv.
func createFleetEvents(ctx context.Context, url, tok string, n int, rcv *eventReceiver) error {
	c := &loadgen.Client{HTTP: &http.Client{}, URL: url, Token: tok}
	for i := range n {
		dev := i % fleetDevices
		body := fmt.Appendf(nil, `{"label":"hot-%d","condition":{"variable":"fleet-%d.temperature","operator":">","value":99},`+
			`"actions":[{"type":"webhook","url":%q}],"backToNormal":[{"type":"webhook","url":%q}]}`,
			i, dev, rcv.srv.URL+"/hook", rcv.srv.URL+"/hook")
		if err := c.Do(ctx, http.MethodPost, "/api/v2.0/events/", body); err != nil {
			return fmt.Errorf("create event %d: %w", i, err)
		}
	}
	return nil
}
