package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/retention"
)

// TestCacheFollowsTheHorizon: the cache reads the horizon, keeps it for its TTL, and
// reads it again when told to forget it.
func TestCacheFollowsTheHorizon(t *testing.T) {
	ctx := context.Background()
	tx, err := env.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	c := retention.NewCache(tx, time.Hour)
	before, hadOne, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if hadOne && !moved.After(before) {
		t.Fatalf("a horizon after %s already: %s", moved, before)
	}
	if _, err := tx.Exec(ctx, `UPDATE retention_state SET raw_horizon = $1`, moved); err != nil {
		t.Fatal(err)
	}
	if h, ok, _ := c.Get(ctx); ok != hadOne || !h.Equal(before) {
		t.Fatalf("the cache read again within its TTL: %s %v", h, ok)
	}
	c.Forget()
	if h, ok, err := c.Get(ctx); err != nil || !ok || !h.Equal(moved) {
		t.Fatalf("after Forget: %s %v %v, want %s", h, ok, err, moved)
	}
}
