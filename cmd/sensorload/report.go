package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// result is what clients saw: latencies and failures per route.
type result struct {
	latencies map[string][]time.Duration
	failures  map[string][]error
	elapsed   time.Duration
}

func newResult() *result {
	return &result{latencies: map[string][]time.Duration{}, failures: map[string][]error{}}
}

// record keeps a success's latency, or the error of a failure.
func (r *result) record(route string, d time.Duration, err error) {
	if err != nil {
		r.failures[route] = append(r.failures[route], err)
		return
	}
	r.latencies[route] = append(r.latencies[route], d)
}

func merge(rs []*result, elapsed time.Duration) *result {
	out := newResult()
	out.elapsed = elapsed
	for _, r := range rs {
		for k, v := range r.latencies {
			out.latencies[k] = append(out.latencies[k], v...)
		}
		for k, v := range r.failures {
			out.failures[k] = append(out.failures[k], v...)
		}
	}
	return out
}

func (r *result) errors() int {
	n := 0
	for _, v := range r.failures {
		n += len(v)
	}
	return n
}

// print writes the summary: one line per route, in the order of the mix, then totals
// and the first few failures.
func (r *result) print(out io.Writer, o options) {
	secs := r.elapsed.Seconds()
	total := 0
	fmt.Fprintf(out, "\n%-52s %8s %9s %9s %9s %7s\n", "route", "requests", "req/s", "p50 ms", "p99 ms", "errors")
	for _, op := range ops {
		lat := r.latencies[op.route]
		slices.Sort(lat)
		n := len(lat) + len(r.failures[op.route])
		total += n
		fmt.Fprintf(out, "%-52s %8d %9.1f %9.1f %9.1f %7d\n", op.route, n, float64(n)/secs,
			ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), len(r.failures[op.route]))
	}
	fmt.Fprintf(out, "\ntotal: %d requests in %.1fs from %d clients = %.0f req/s; errors: %d\n",
		total, secs, o.clients, float64(total)/secs, r.errors())
	shown := 0
	for _, errs := range r.failures {
		for _, err := range errs[:min(len(errs), 3)] {
			if shown < 10 {
				fmt.Fprintln(out, "  error:", err)
				shown++
			}
		}
	}
}

// quantile of sorted latencies by nearest rank (0 when there are none).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
