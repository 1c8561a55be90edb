package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
)

// TestSumsPastTheLargestDouble: values are any finite doubles, so sums of them can pass
// the largest one. Two requests each writing 1e308 into the same old minute were a 500
// (the tile's SQL sum raised "value out of range"); now every write is stored, sums and
// means past the largest double read as null (IEEE gives ±Infinity; JSON has none),
// the tiles stay exact, the catch-up job builds such tiles, and a synthetic expression
// has no value where its arithmetic passes it.
func TestSumsPastTheLargestDouble(t *testing.T) {
	scope := env.NewDriftScope(t)
	ctx := context.Background()
	c, _ := freshClient(t)
	old := time.Now().Add(-72 * time.Hour).Truncate(time.Hour).UnixMilli()
	now := time.Now().Truncate(time.Minute).UnixMilli()
	// late values (their tiles are added to by the write), then current ones (by CatchUp)
	for _, ts := range []int64{old, old + 1000, old + 61_000, now, now + 1} {
		postDots(t, c, "huge", "h", [2]float64{float64(ts), 1e308})
	}
	postDots(t, c, "huge", "h", [2]float64{float64(old + 120_000), 5})
	id := c.VariableID("huge", "h")
	if _, err := (&values.Store{Pool: env.DB.Pool}).CatchUp(ctx, time.UnixMilli(now+120_000)); err != nil {
		t.Fatalf("CatchUp over tiles whose sums pass the largest double: %v", err)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 0 {
		t.Fatalf("%d tiles differ from their values", drift)
	}

	stat := func(agg string, start, end int64) any {
		t.Helper()
		r := expectStatus(t, c.Get(fmt.Sprintf("/api/v1.6/variables/%s/statistics/%s/%d/%d", id, agg, start, end)), 200)
		return r[agg]
	}
	end := now + 60_000
	for agg, want := range map[string]any{"sum": nil, "mean": nil, "count": 6.0, "max": 1e308, "min": 5.0} {
		if got := stat(agg, old-3600_000, end); got != want {
			t.Errorf("v1.6 %s over everything: %v, want %v", agg, got, want)
		}
	}
	// raw values at a range's edges: PostgreSQL's sum refuses 1e308 + 1e308, and the
	// service runs the statement again with IEEE sums
	if got := stat("sum", now, now+1); got != nil {
		t.Errorf("v1.6 sum of two raw values of 1e308: %v, want null", got)
	}
	edge := postStats(t, c, statsBody{"start": now, "end": now + 1, "variables": []any{statsBody{"variable": id}},
		"aggregations": []string{"sum", "count"}})
	if res := entry(t, edge, 0)["results"].(map[string]any); res["sum"].(map[string]any)["value"] != nil ||
		res["count"].(map[string]any)["value"] != 2.0 {
		t.Errorf("E7 over two raw values of 1e308: %v", res)
	}
	if got := stat("sum", old, old+999); got != 1e308 {
		t.Errorf("v1.6 sum of one value: %v, want 1e308", got)
	}
	if got := stat("mean", old+61_000, old+120_000); got != (1e308+5)/2 {
		t.Errorf("v1.6 mean of a finite sum: %v", got)
	}
	// a mean of subnormals that rounds to 0: PostgreSQL's / raises "underflow" there
	postDots(t, c, "tiny", "t", [2]float64{float64(old), 5e-324}, [2]float64{float64(old + 1), 0}, [2]float64{float64(old + 2), 0})
	tiny := c.VariableID("tiny", "t")
	// and their quarters and days are built from the minute (the spread merge divided and
	// squared them: "underflow"): no spread below 1e-100, as none beyond 1e150
	var tinyKey int64
	if err := env.DB.Pool.QueryRow(ctx, `SELECT id FROM variables WHERE public_id = $1`, tiny).Scan(&tinyKey); err != nil {
		t.Fatal(err)
	}
	if err := (&values.Store{Pool: env.DB.Pool}).RebuildVariable(ctx, tinyKey, time.Time{}); err != nil {
		t.Fatalf("rebuild the tiers of 5e-324, 0, 0: %v", err)
	}
	for _, path := range []string{
		fmt.Sprintf("/api/v1.6/variables/%s/statistics/mean/%d/%d", tiny, old, old+2),             // raw values
		fmt.Sprintf("/api/v1.6/variables/%s/statistics/mean/%d/%d", tiny, old-60_000, old+60_000), // the minute's tile
	} {
		if got := expectStatus(t, c.Get(path), 200)["mean"]; got != 0.0 {
			t.Errorf("%s: mean %v, want 0 (5e-324 / 3 in IEEE arithmetic)", path, got)
		}
	}

	r := postStats(t, c, statsBody{"start": old - 3600_000, "end": end, "variables": []any{statsBody{"variable": id}},
		"aggregations": []string{"count", "sum", "mean", "max"}})
	res := entry(t, r, 0)["results"].(map[string]any)
	if res["sum"].(map[string]any)["value"] != nil || res["mean"].(map[string]any)["value"] != nil ||
		res["count"].(map[string]any)["value"] != 6.0 {
		t.Errorf("E7: %v", res)
	}
	for _, agg := range []string{"sum", "mean"} {
		r := expectStatus(t, c.Post(resamplePath, map[string]any{"variables": []string{id}, "aggregation": agg, "period": "1D",
			"start": old - 86_400_000, "end": end}), 200)
		first := r["results"].([]any)[0].([]any)[0].([]any) // the day of the three 1e308
		if first[1] != nil {
			t.Errorf("E8 %s of the day past the largest double: %v, want null", agg, first[1])
		}
	}

	// synthetic: no value where the arithmetic passes the largest double, the others
	// computed (it was an error that failed the whole recompute, and the creation: 500)
	i := 0
	for expr, want := range map[string]map[int64]float64{
		"cumsum({{huge.h}})":      {old: 1e308},
		"{{huge.h}} * 1e300":      {old + 120_000: 5e300},      // plain operators for 5, guarded for 1e308
		"{{huge.h}} * 2 - 1e308":  {old + 120_000: 10 - 1e308}, // guarded operators for every row
		"{{huge.h}} / 1e-100 + 1": {old + 120_000: 5e100 + 1},
	} {
		s := createVariable(t, c, "~huge", map[string]any{"label": fmt.Sprintf("s%d", i), "syntheticExpression": expr})
		waitValues(t, c, jsonString(s, "id"), want, liveBound)
		i++
	}
}
