// Package gapfill fills the empty buckets of a resampled series as pandas does
// (API.md §20): previous is Series.ffill(limit), linear is
// Series.interpolate(method="time", limit, limit_area="inside"), zero is fillna(0).
// E8 applies it to each variable's series after the compiled statement answered, before
// join_dataframes joins them.
package gapfill

import "fmt"

// Method is a way of filling.
type Method string

// The methods (API.md §20).
const (
	None     Method = "none"
	Zero     Method = "zero"
	Previous Method = "previous"
	Linear   Method = "linear"
)

// Methods are the accepted names, in the order errors list them.
var Methods = []Method{None, Zero, Previous, Linear}

// Parse reads a method name.
func Parse(s string) (Method, error) {
	for _, m := range Methods {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown fill method %q", s)
}

// Fill fills the nil values of ys in place. xs are the buckets' labels (epoch ms,
// ascending); limit is the most consecutive empty buckets filled after a value (0: no
// limit; zero ignores it); seed, when not nil, is a value standing just before the
// first bucket (previous carries it, counting the limit from there).
func Fill(m Method, xs []int64, ys []*float64, limit int, seed *float64) {
	switch m {
	case Zero:
		for i := range ys {
			if ys[i] == nil {
				z := 0.0
				ys[i] = &z
			}
		}
	case Previous:
		forward(ys, limit, seed)
	case Linear:
		interpolate(xs, ys, limit)
	}
}

// forward is ffill(limit): each empty bucket takes the last value before it, at most
// limit buckets after that value.
func forward(ys []*float64, limit int, last *float64) {
	run := 0
	for i, y := range ys {
		if y != nil {
			last, run = y, 0
			continue
		}
		run++
		if last != nil && (limit == 0 || run <= limit) {
			v := *last
			ys[i] = &v
		}
	}
}

// interpolate is interpolate(method="time", limit, limit_area="inside"): the empty
// buckets between two values lie on the straight line between them over time, the
// first limit of each run only; runs before the first value or after the last stay
// empty.
func interpolate(xs []int64, ys []*float64, limit int) {
	prev := -1
	for i, y := range ys {
		if y == nil {
			continue
		}
		if prev >= 0 && i > prev+1 {
			x0, y0, x1, y1 := float64(xs[prev]), *ys[prev], float64(xs[i]), *y
			for k := prev + 1; k < i && (limit == 0 || k-prev <= limit); k++ {
				v := y0 + (y1-y0)*(float64(xs[k])-x0)/(x1-x0)
				ys[k] = &v
			}
		}
		prev = i
	}
}
