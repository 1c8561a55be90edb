package gapfill

import (
	"reflect"
	"testing"
)

func ptrs(vs ...any) []*float64 {
	out := make([]*float64, len(vs))
	for i, v := range vs {
		if f, ok := v.(float64); ok {
			out[i] = &f
		}
	}
	return out
}

func vals(ys []*float64) []any {
	out := make([]any, len(ys))
	for i, y := range ys {
		if y != nil {
			out[i] = *y
		}
	}
	return out
}

// TestFill pins each method on a small series with leading, inner and trailing runs
// (the pandas answers, worked by hand: the API tests compare with pandas itself).
func TestFill(t *testing.T) {
	xs := []int64{0, 10, 20, 30, 40, 50, 60, 70}
	in := func() []*float64 { return ptrs(nil, 1.0, nil, nil, nil, 5.0, nil, nil) }
	seed := 9.0
	for _, tc := range []struct {
		m     Method
		limit int
		seed  *float64
		want  []any
	}{
		{None, 0, nil, []any{nil, 1.0, nil, nil, nil, 5.0, nil, nil}},
		{Zero, 1, nil, []any{0.0, 1.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0}},
		{Previous, 0, nil, []any{nil, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0}},
		{Previous, 2, &seed, []any{9.0, 1.0, 1.0, 1.0, nil, 5.0, 5.0, 5.0}},
		{Linear, 0, &seed, []any{nil, 1.0, 2.0, 3.0, 4.0, 5.0, nil, nil}},
		{Linear, 1, nil, []any{nil, 1.0, 2.0, nil, nil, 5.0, nil, nil}},
	} {
		ys := in()
		Fill(tc.m, xs, ys, tc.limit, tc.seed)
		if got := vals(ys); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s limit %d: %v, want %v", tc.m, tc.limit, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	if m, err := Parse("linear"); err != nil || m != Linear {
		t.Fatal(m, err)
	}
	if _, err := Parse("spline"); err == nil {
		t.Fatal("spline accepted")
	}
}
