package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/events"
	"github.com/sensordata/sensorapi/pkg/testenv"
)

// eventConfig is the test server's configuration for events: webhooks to the test's
// own loopback receiver allowed, fast retries and polls.
func eventConfig() config.Config {
	cfg := env.Config()
	cfg.Events = config.Events{WebhookAllowPrivate: true, RetryBase: 50 * time.Millisecond,
		RetryMax: time.Second, Poll: 50 * time.Millisecond, Sweep: 500 * time.Millisecond}
	return cfg
}

// hook is one request a receiver got.
type hook struct {
	Delivery, Signature string
	Body                []byte
	Method              string
	At                  time.Time
}

// receiver is a real HTTP server on 127.0.0.1 that records webhooks.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	hooks []hook
	fail  int // answer 500 to this many requests first
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		b, _ := io.ReadAll(q.Body)
		r.mu.Lock()
		r.hooks = append(r.hooks, hook{Delivery: q.Header.Get("X-Event-Delivery"),
			Signature: q.Header.Get("X-Signature"), Body: b, Method: q.Method, At: time.Now()})
		failing := r.fail > 0
		if failing {
			r.fail--
		}
		r.mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// got returns a copy of the requests so far.
func (r *receiver) got() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.hooks...)
}

// wait waits until the receiver got n requests, and fails past the timeout.
func (r *receiver) wait(t *testing.T, n int, timeout time.Duration) []hook {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h := r.got()
		if len(h) >= n {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d requests, want %d", len(h), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quiet fails when the receiver gets more than n requests within d.
func (r *receiver) quiet(t *testing.T, n int, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	if h := r.got(); len(h) != n {
		t.Fatalf("receiver got %d requests, want %d: %q", len(h), n, bodies(h))
	}
}

func bodies(hs []hook) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h.Body)
	}
	return out
}

// postDot writes one value over HTTP (acknowledged means committed).
func postDot(t *testing.T, c *testenv.Client, device, variable string, value float64, ts int64) {
	t.Helper()
	if r := c.Post(fmt.Sprintf("/api/v1.6/devices/%s/%s/values", device, variable),
		map[string]any{"value": value, "timestamp": ts}); r.Status != http.StatusCreated {
		t.Fatalf("post value: %d %s", r.Status, r.Body)
	}
}

// createEvent creates an event and returns its body (with the secret).
func createEvent(t *testing.T, c *testenv.Client, body map[string]any) map[string]any {
	t.Helper()
	r := c.Post("/api/v2.0/events/", body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create event: %d %s", r.Status, r.Body)
	}
	return r.Object(t)
}

// webhook is a webhook action to the receiver whose body names state and value.
func webhook(r *receiver) map[string]any {
	return map[string]any{"type": "webhook", "url": r.URL + "/hook",
		"body": `{"state":"{{state}}","value":{{value}},"ts":{{timestamp}},"event":"{{event.label}}","dev":"{{device.label}}","var":"{{variable.label}}"}`}
}

// TestEventTriggersAndReturnsToNormal: a webhook per transition, in data order, with
// the templates substituted and a valid signature; values that do not change the
// state send nothing; the state is visible on the event.
func TestEventTriggersAndReturnsToNormal(t *testing.T) {
	c := env.ClientWith(t, eventConfig()).As(env.NewAccount(t))
	rcv := newReceiver(t)
	postDot(t, c, "boiler", "temp", 20, 1000) // the variable exists before the event
	ev := createEvent(t, c, map[string]any{"label": "Hot", "condition": map[string]any{
		"variable": "boiler.temp", "operator": ">", "value": 80},
		"actions": []any{webhook(rcv)}, "backToNormal": []any{webhook(rcv)}})
	secret, _ := ev["secret"].(string)
	if len(secret) < 32 || ev["state"] != "normal" || ev["label"] != "hot" {
		t.Fatalf("created: %v", ev)
	}
	if g := c.Get("/api/v2.0/events/~hot").Object(t); g["secret"] != nil {
		t.Fatalf("the secret is shown again: %v", g)
	}

	postDot(t, c, "boiler", "temp", 79, 2000)
	postDot(t, c, "boiler", "temp", 85, 3000) // triggers
	h := rcv.wait(t, 1, 5*time.Second)
	var body map[string]any
	if err := json.Unmarshal(h[0].Body, &body); err != nil {
		t.Fatalf("webhook body %q: %v", h[0].Body, err)
	}
	if body["state"] != "triggered" || body["value"] != 85.0 || body["ts"] != 3000.0 || body["event"] != "hot" ||
		body["dev"] != "boiler" || body["var"] != "temp" {
		t.Fatalf("webhook body: %s", h[0].Body)
	}
	if h[0].Signature != events.Sign(secret, h[0].Body) || !strings.HasPrefix(h[0].Signature, "sha256=") {
		t.Fatalf("signature %q does not verify", h[0].Signature)
	}
	postDot(t, c, "boiler", "temp", 90, 4000) // still triggered: nothing
	rcv.quiet(t, 1, 300*time.Millisecond)
	if s := c.Get("/api/v2.0/events/~hot").Object(t)["state"]; s != "triggered" {
		t.Fatalf("state %v, want triggered", s)
	}
	postDot(t, c, "boiler", "temp", 80, 5000) // not > 80: back to normal
	h = rcv.wait(t, 2, 5*time.Second)
	if err := json.Unmarshal(h[1].Body, &body); err != nil || body["state"] != "normal" || body["value"] != 80.0 {
		t.Fatalf("back to normal body: %s", h[1].Body)
	}
	if h[0].Delivery == h[1].Delivery || h[1].Delivery == "" {
		t.Fatalf("delivery ids %q, %q", h[0].Delivery, h[1].Delivery)
	}
	rcv.quiet(t, 2, 300*time.Millisecond)
}
