package querybuilder

import (
	"reflect"
	"testing"
)

// TestAggregationLists pins the names each endpoint offers, in the order of the
// "Choose one of" messages derived from them (API text: a new aggregation is added at
// the end of a list, not reordered into it).
func TestAggregationLists(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"E7", Aggregations, []string{"first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"}},
		{"E8/E9", ResampleAggregations, []string{"mean", "min", "max", "count", "sum", "twa", "integral", "coverage", "increase"}},
		{"v1.6", VariableStatistics, []string{"mean", "variance", "min", "max", "sum", "count"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestAggregationsComputeOneWay: every entry says how E7 computes it, in exactly one
// way, and how its answer reads it.
func TestAggregationsComputeOneWay(t *testing.T) {
	for _, a := range aggregations {
		ways := 0
		for _, set := range []bool{a.summary != nil, a.spread != "", a.fraction != "", a.signal != nil} {
			if set {
				ways++
			}
		}
		if ways != 1 || a.answer == nil {
			t.Errorf("%s: %d ways to compute it (want 1), answer set: %v", a.name, ways, a.answer != nil)
		}
	}
}
