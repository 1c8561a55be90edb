package testenv

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/sensordata/sensorapi/pkg/store"
)

// Proxy is a TCP fault proxy between a test's service and the Env's PostgreSQL:
// toxiproxy's proxy run in-process on 127.0.0.1, whose toxics (latency, reset_peer,
// timeout, bandwidth, slicer, limit_data…) the test adds and removes while it runs.
type Proxy struct {
	DB   *store.DB // the Env's database, reached only through the proxy
	Addr string    // the proxy's listening address
	p    *toxiproxy.Proxy
}

// Proxied starts a proxy in front of the Env's database server and opens a pool on the
// Env's database through it (serve it with Env.Serve). Check what was stored through
// Env.DB, which does not pass the proxy. Both go when the test ends.
func (e *Env) Proxied(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	// toxiproxy's toxics log through zerolog's global logger (traces by the thousand);
	// nothing else here uses zerolog
	zerolog.SetGlobalLevel(zerolog.Disabled)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "postgres", "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	u.Host = p.Listen
	db, err := store.Open(context.Background(), u.String(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &Proxy{DB: db, Addr: p.Listen, p: p}
}

// Add adds a toxic of the given type (see toxiproxy's README) with its attributes on
// each named stream: "upstream" (service → database) and/or "downstream" (database →
// service). It applies to open connections as well as new ones.
func (x *Proxy) Add(t testing.TB, typ string, attrs map[string]any, streams ...string) {
	t.Helper()
	for _, s := range streams {
		j, err := json.Marshal(map[string]any{"name": typ + "_" + s, "type": typ, "stream": s, "attributes": attrs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.p.Toxics.AddToxicJson(strings.NewReader(string(j))); err != nil {
			t.Fatalf("add toxic %s on %s: %v", typ, s, err)
		}
	}
}

// Clear removes every toxic. A timeout toxic closes the connections it held.
func (x *Proxy) Clear() { x.p.Toxics.ResetToxics(context.Background()) }
