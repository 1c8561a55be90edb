package api_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/testenv"
	"github.com/sensordata/sensorapi/testcontainers"
)

// TestDatabaseOutage stops the database under a running server: data routes and
// /readyz answer 503 quickly, and the same server recovers once the database is back.
func TestDatabaseOutage(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("needs a container of its own to stop")
	}
	ctx := context.Background()
	tsdb, err := testcontainers.Start(ctx, testcontainers.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tsdb.Terminate(context.Background()) })
	e, err := testenv.New(ctx, tsdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
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
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v during the outage", path, d)
		}
		if r.Status != 503 || string(r.Body) != `{"code":503001,"message":"Service unavailable."}` {
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
