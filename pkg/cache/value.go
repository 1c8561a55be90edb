package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Value keeps one value read from the database for a TTL, for the paths that consult it
// on every request (the raw horizon, the rollup tiles' mark). Reading a fresh value
// takes no lock; one caller at a time refreshes a stale one while the others wait for
// it. When a read fails, the last value read is kept (the zero value before any).
type Value[T any] struct {
	read func(ctx context.Context) (T, error)
	ttl  time.Duration

	cur atomic.Pointer[snapshot[T]]
	mu  sync.Mutex // held while refreshing
}

// snapshot is one read (or one failed read, keeping the last value).
type snapshot[T any] struct {
	read time.Time
	v    T
}

// NewValue calls read at most once per ttl.
func NewValue[T any](ttl time.Duration, read func(ctx context.Context) (T, error)) *Value[T] {
	return &Value[T]{read: read, ttl: ttl}
}

// refreshTimeout bounds one read: other callers wait for it.
const refreshTimeout = time.Second

// Get returns the value, from memory when read less than TTL ago. When the read fails
// it returns the last value known with the error, once: the calls within the next TTL
// get that value without an error and without a read, so a failing database costs one
// attempt (and one log line) per TTL.
func (c *Value[T]) Get(ctx context.Context) (T, error) {
	if s := c.fresh(); s != nil {
		return s.v, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.fresh(); s != nil { // refreshed while this caller waited
		return s.v, nil
	}
	next := snapshot[T]{read: time.Now()}
	if old := c.cur.Load(); old != nil {
		next.v = old.v
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	v, err := c.read(rctx)
	if err == nil {
		next.v = v
	}
	c.cur.Store(&next)
	return next.v, err
}

func (c *Value[T]) fresh() *snapshot[T] {
	if s := c.cur.Load(); s != nil && time.Since(s.read) < c.ttl {
		return s
	}
	return nil
}

// Forget makes the next Get read again (after a change made by this instance).
func (c *Value[T]) Forget() {
	if s := c.cur.Load(); s != nil {
		stale := *s
		stale.read = time.Time{}
		c.cur.Store(&stale)
	}
}
