package values_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRebuildKeepsHugeValues: a quarter-hour whose minutes hold ±MaxFloat64 (the API
// takes them; an import or a synthetic Variable can write them) rebuilds without an
// overflow, and its tile's sum is the IEEE sum (MaxFloat64 + −MaxFloat64 + 1 = 1).
// The merge of minutes into quarters subtracted the minutes' mins before it knew that
// a minute without a spread (values past 1e150) leaves the quarter without one.
func TestRebuildKeepsHugeValues(t *testing.T) {
	t0 := time.Date(2001, 2, 3, 4, 0, 0, 0, time.UTC).UnixMilli()
	s := env.Seed(t, env.NewAccount(t), "huge", "v", []testenv.Point{
		{TS: t0, Value: math.MaxFloat64},
		{TS: t0 + 60_000, Value: -math.MaxFloat64},
		{TS: t0 + 120_000, Value: 1},
	}) // Seed rebuilds the variable's tiles
	var n int
	var sum float64
	if err := env.DB.Pool.QueryRow(context.Background(),
		`SELECT n, sum FROM value_quarters WHERE variable_id = $1`, s.VariableKey).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 3 || sum != 1 {
		t.Fatalf("quarter: n=%d sum=%g, want 3 and 1", n, sum)
	}
}
