package values

import (
	"slices"
	"testing"
	"time"
)

// TestOldDays: one (variable, UTC day) pair per day a variable's old rows fall in,
// days before 1970 floored too; rows from the cutoff on cost nothing.
func TestOldDays(t *testing.T) {
	day := (24 * time.Hour).Milliseconds()
	rows := []Row{{Variable: 1, TS: -1}, {Variable: 1, TS: 5}, {Variable: 1, TS: day - 1}, {Variable: 1, TS: day},
		{Variable: 2, TS: day + 7}, {Variable: 2, TS: 3 * day}}
	vars, days := oldDays(rows, 3*day)
	want := []time.Time{Day(time.UnixMilli(-1)), Day(time.UnixMilli(0)), Day(time.UnixMilli(day)), Day(time.UnixMilli(day))}
	if !slices.Equal(vars, []int64{1, 1, 1, 2}) || !slices.EqualFunc(days, want, time.Time.Equal) {
		t.Fatalf("oldDays: %v %v, want [1 1 1 2] %v", vars, days, want)
	}
}
