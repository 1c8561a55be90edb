// Package cache holds the lookups every write repeats (token → account, device label →
// device, variable label → variable) in memory, kept correct across instances: entries
// are dropped when the database says they changed (pkg/notify) and expire after a
// short TTL as a safety net.
package cache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"
)

// Cache is a bounded LRU of K → V whose entries expire after a TTL.
//
// A lookup that misses reads the database and then fills the entry. If an
// invalidation arrives between that read and the fill, the value read may already be
// stale, so Fill takes the generation seen before the read (Begin) and stores nothing
// when any invalidation happened since.
type Cache[K comparable, V any] struct {
	lru *expirable.LRU[K, V]
	// live reports whether invalidations are being received; while they are not, the
	// cache answers nothing and stores nothing.
	live func() bool

	mu  sync.Mutex // orders Fill against Invalidate/Purge
	gen atomic.Uint64

	hits, misses prometheus.Counter
}

// Options configure a cache; Name labels its metrics.
type Options struct {
	Name string
	Size int
	TTL  time.Duration
	// Live gates the cache (nil: always live).
	Live func() bool
	// Lookups counts hits and misses by cache and result (nil: not counted).
	Lookups *prometheus.CounterVec
}

// New makes an empty cache.
func New[K comparable, V any](o Options) *Cache[K, V] {
	c := &Cache[K, V]{lru: expirable.NewLRU[K, V](o.Size, nil, o.TTL), live: o.Live}
	if c.live == nil {
		c.live = func() bool { return true }
	}
	if o.Lookups != nil {
		c.hits = o.Lookups.WithLabelValues(o.Name, "hit")
		c.misses = o.Lookups.WithLabelValues(o.Name, "miss")
	}
	return c
}

// Get returns the entry for k when present, unexpired and the cache is live.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	var v V
	ok := false
	if c.live() {
		v, ok = c.lru.Get(k)
	}
	switch {
	case ok && c.hits != nil:
		c.hits.Inc()
	case !ok && c.misses != nil:
		c.misses.Inc()
	}
	return v, ok
}

// Begin returns the generation to pass to Fill; call it before reading the database.
func (c *Cache[K, V]) Begin() uint64 { return c.gen.Load() }

// Fill stores k → v read after Begin returned gen, unless something was invalidated
// since or the cache is not live.
func (c *Cache[K, V]) Fill(gen uint64, k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() == gen && c.live() {
		c.lru.Add(k, v)
	}
}

// Invalidate drops k and voids fills in flight.
func (c *Cache[K, V]) Invalidate(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	c.lru.Remove(k)
}

// Purge drops everything and voids fills in flight.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	c.lru.Purge()
}
