package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/store"
)

// TestStatementTimeoutCancelsAndFreesConnection: SENSORAPI_QUERY_TIMEOUT becomes the
// server-side statement_timeout; the runaway query ends with an error the API maps to
// its timeout answer, and the connection goes back to the pool usable.
func TestStatementTimeoutCancelsAndFreesConnection(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, env.DSN, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, "SELECT pg_sleep(5)") // ends without error unless cancelled
	if err == nil || !fault.IsTimeout(err) {
		t.Fatalf("runaway query: %v", err)
	}
	if fault.FromDatabase(err) != nil {
		t.Fatal("a timeout must not read as an outage")
	}
	var one int
	if err := db.NewRaw("SELECT 1").Scan(ctx, &one); err != nil || one != 1 {
		t.Fatalf("pool after timeout: %v", err)
	}
	if n := db.Pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still held", n)
	}
}
