package main

import (
	"errors"
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 200; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 100 * time.Millisecond, 0.99: 198 * time.Millisecond, 1: 200 * time.Millisecond} {
		if got := quantile(lat, q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

// A failed request counts as an error on its route and adds no latency.
func TestResultCountsFailures(t *testing.T) {
	a, b := newResult(), newResult()
	a.record("r", time.Millisecond, nil)
	b.record("r", time.Second, errors.New("500"))
	m := merge([]*result{a, b}, time.Second)
	if m.errors() != 1 || len(m.latencies["r"]) != 1 || m.latencies["r"][0] != time.Millisecond {
		t.Fatalf("merged %+v", m)
	}
}

// The mix picks every operation, in proportion to its weight.
func TestPickFollowsWeights(t *testing.T) {
	w := newWorkload("http://127.0.0.1:0", dataset{}, 1)
	counts := map[string]int{}
	rng := newRand(1)
	const n = 100_000
	for range n {
		counts[w.pick(rng).route]++
	}
	for _, o := range ops {
		share := float64(counts[o.route]) / n
		want := float64(o.weight) / float64(w.total)
		if share < want*0.9 || share > want*1.1 {
			t.Errorf("%s: share %.3f, want %.3f", o.route, share, want)
		}
	}
}
