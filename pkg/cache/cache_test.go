package cache

import (
	"testing"
	"time"
)

// TestFillAfterInvalidateIsDropped: a value read before an invalidation may be stale,
// so a fill begun before it stores nothing, and a fill begun after it does.
func TestFillAfterInvalidateIsDropped(t *testing.T) {
	c := New[string, int](Options{Size: 10, TTL: time.Minute})
	gen := c.Begin()
	c.Invalidate("k")
	c.Fill(gen, "k", 1)
	if v, ok := c.Get("k"); ok {
		t.Fatalf("stale fill stored: %d", v)
	}
	c.Fill(c.Begin(), "k", 2)
	if v, ok := c.Get("k"); !ok || v != 2 {
		t.Fatalf("fresh fill: %d %v", v, ok)
	}
	c.Purge()
	if _, ok := c.Get("k"); ok {
		t.Fatal("purge kept the entry")
	}
}

// TestNotLiveAnswersNothing: while invalidations are not received, nothing is read
// from or stored into the cache.
func TestNotLiveAnswersNothing(t *testing.T) {
	live := true
	c := New[string, int](Options{Size: 10, TTL: time.Minute, Live: func() bool { return live }})
	c.Fill(c.Begin(), "a", 1)
	live = false
	if _, ok := c.Get("a"); ok {
		t.Fatal("answered while not live")
	}
	c.Fill(c.Begin(), "b", 2)
	live = true
	if _, ok := c.Get("b"); ok {
		t.Fatal("stored while not live")
	}
}

// TestEntriesExpire: the TTL is the safety net when an invalidation is lost.
func TestEntriesExpire(t *testing.T) {
	c := New[string, int](Options{Size: 10, TTL: 20 * time.Millisecond})
	c.Fill(c.Begin(), "a", 1)
	time.Sleep(60 * time.Millisecond)
	if _, ok := c.Get("a"); ok {
		t.Fatal("entry outlived its TTL")
	}
}

// TestRouterDispatchesByKind: payloads reach the handlers of their kind only.
func TestRouterDispatchesByKind(t *testing.T) {
	r := NewRouter()
	var got []Invalidation
	r.On("device", func(i Invalidation) { got = append(got, i) })
	if err := r.Dispatch(`{"k":"device","a":7,"l":"boiler"}`); err != nil {
		t.Fatal(err)
	}
	if err := r.Dispatch(`{"k":"variable","d":1,"l":"t"}`); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Account != 7 || got[0].Label != "boiler" {
		t.Fatalf("got %+v", got)
	}
	if err := r.Dispatch(`not json`); err == nil {
		t.Fatal("no error for an unreadable payload")
	}
}
