package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/sensordata/sensorapi/pkg/cache"
)

// Cache keeps the raw horizon for a few seconds, for the paths that consult it on every
// request: the write check (pkg/ingest refuses dots before it) and the read path (tiers
// before it, API.md §16). The horizon only moves forward and only by a run of the job,
// at most hourly, so a stale value is at most TTL late.
type Cache struct {
	v *cache.Value[horizon]
}

// horizon is one answer of Horizon.
type horizon struct {
	h  time.Time
	ok bool
}

// NewCache reads through q at most once per ttl.
func NewCache(q Querier, ttl time.Duration) *Cache {
	return &Cache{v: cache.NewValue(ttl, func(ctx context.Context) (horizon, error) {
		h, ok, err := Horizon(ctx, q)
		return horizon{h, ok}, err
	})}
}

// Get returns the horizon as Horizon does, from memory when read less than TTL ago;
// when the read fails, the last value known (none at first) with the error, once
// (cache.Value).
func (c *Cache) Get(ctx context.Context) (time.Time, bool, error) {
	h, err := c.v.Get(ctx)
	return h.h, h.ok, err
}

// Forget makes the next Get read the horizon again (after a run of this instance).
func (c *Cache) Forget() { c.v.Forget() }

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
