package retention

import (
	"context"
	"sync"
	"time"
)

// Cache keeps the raw horizon for a few seconds, for the paths that consult it on every
// request: the write check (pkg/ingest refuses dots before it) and the read path (tiers
// before it, API.md §16). The horizon only moves forward and only by a run of the job,
// at most hourly, so a stale value is at most TTL late.
type Cache struct {
	q   Querier
	ttl time.Duration

	mu   sync.Mutex
	read time.Time // when h and ok were read (or a read failed)
	h    time.Time
	ok   bool
}

// NewCache reads through q at most once per ttl.
func NewCache(q Querier, ttl time.Duration) *Cache { return &Cache{q: q, ttl: ttl} }

// refreshTimeout bounds one read: callers wait for it under the cache's lock.
const refreshTimeout = time.Second

// Get returns the horizon as Horizon does, from memory when read less than TTL ago.
// When the read fails it returns the last value known (none at first) with the error,
// once: the calls within the next TTL get that value without an error and without a
// read, so a failing database costs one attempt (and one log line) per TTL.
func (c *Cache) Get(ctx context.Context) (time.Time, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.read.IsZero() && time.Since(c.read) < c.ttl {
		return c.h, c.ok, nil
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	h, ok, err := Horizon(rctx, c.q)
	c.read = time.Now()
	if err == nil {
		c.h, c.ok = h, ok
	}
	return c.h, c.ok, err
}

// Forget makes the next Get read the horizon again (after a run of this instance).
func (c *Cache) Forget() {
	c.mu.Lock()
	c.read = time.Time{}
	c.mu.Unlock()
}
