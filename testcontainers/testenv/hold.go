package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// HoldDevice locks the row of the device with that label in the token's account, so
// that every batch writing to it waits: messages sent meanwhile queue up and are
// committed together once release (also run at the test's end) lets it go. A test
// that sends its messages before release and waits for them with WaitQueued knows
// they shared the group commit, without counting batches or timing anything.
func (e *Env) HoldDevice(t testing.TB, token, label string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var key int64
	err = tx.QueryRow(ctx, `SELECT d.id FROM devices d JOIN tokens k ON k.account_id = d.account_id
		WHERE k.hash = sha256($1::bytea) AND d.label = $2 FOR UPDATE OF d`, token, label).Scan(&key)
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("hold device %s: %v", label, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// HoldValues locks the values table against inserts, so that every batch waits, until
// release (also run at the test's end): HoldDevice for messages to many devices. Their
// devices and variables must exist first: creating them would wait too.
func (e *Env) HoldValues(t testing.TB) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE "values" IN SHARE MODE`); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("hold values: %v", err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// Queued is how many dots the instance's ingestion pipeline holds (queued or
// committing).
func (c *Client) Queued() int { return int(testutil.ToFloat64(c.Server.Metrics.IngestQueued)) }

// WaitQueued waits until the instance's pipeline holds at least n dots, or done is
// closed (the messages were answered without queueing); it fails the test after
// Patience.
func (c *Client) WaitQueued(n int, done <-chan struct{}) {
	c.t.Helper()
	for deadline := time.Now().Add(Patience); c.Queued() < n; {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the pipeline holds %d dots after %v, want %d", c.Queued(), Patience, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
