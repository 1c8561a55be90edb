package retention

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Cache keeps the raw horizon for a few seconds, for the paths that consult it on every
// request: the write check (pkg/ingest refuses dots before it) and the read path (tiers
// before it, API.md §16). The horizon only moves forward and only by a run of the job,
// at most hourly, so a stale value is at most TTL late. Reading a fresh value takes no
// lock; one caller at a time refreshes a stale one while the others wait for it.
type Cache struct {
	q   Querier
	ttl time.Duration

	cur atomic.Pointer[snapshot]
	mu  sync.Mutex // held while refreshing
}

// snapshot is one read of the horizon (or one failed read, keeping the last value).
type snapshot struct {
	read time.Time
	h    time.Time
	ok   bool
}

// NewCache reads through q at most once per ttl.
func NewCache(q Querier, ttl time.Duration) *Cache { return &Cache{q: q, ttl: ttl} }

// refreshTimeout bounds one read: other callers wait for it.
const refreshTimeout = time.Second

// Get returns the horizon as Horizon does, from memory when read less than TTL ago.
// When the read fails it returns the last value known (none at first) with the error,
// once: the calls within the next TTL get that value without an error and without a
// read, so a failing database costs one attempt (and one log line) per TTL.
func (c *Cache) Get(ctx context.Context) (time.Time, bool, error) {
	if s := c.fresh(); s != nil {
		return s.h, s.ok, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.fresh(); s != nil { // refreshed while this caller waited
		return s.h, s.ok, nil
	}
	next := snapshot{read: time.Now()}
	if old := c.cur.Load(); old != nil {
		next.h, next.ok = old.h, old.ok
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	h, ok, err := Horizon(rctx, c.q)
	if err == nil {
		next.h, next.ok = h, ok
	}
	c.cur.Store(&next)
	return next.h, next.ok, err
}

func (c *Cache) fresh() *snapshot {
	if s := c.cur.Load(); s != nil && time.Since(s.read) < c.ttl {
		return s
	}
	return nil
}

// Forget makes the next Get read the horizon again (after a run of this instance).
func (c *Cache) Forget() {
	if s := c.cur.Load(); s != nil {
		stale := *s
		stale.read = time.Time{}
		c.cur.Store(&stale)
	}
}

// Known is Get for the paths that go on when the horizon cannot be read (the database
// is failing, so the write or read would likely fail too): the failure is logged and
// the last value known is used.
func (c *Cache) Known(ctx context.Context, log *slog.Logger) (time.Time, bool) {
	h, ok, err := c.Get(ctx)
	if err != nil {
		log.Warn("raw horizon unreadable; going on with the last one known", "error", err.Error())
	}
	return h, ok
}
