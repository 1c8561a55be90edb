package retention_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// acrossAggs are the aggregations the tiers answer before the raw horizon (API.md §16).
var acrossAggs = []string{"count", "sum", "mean", "min", "max", "std", "first", "last"}

// readAcross is the E7 answer for s over [from, to], every aggregation of acrossAggs.
func readAcross(t *testing.T, c *testenv.Client, s testenv.Seeded, from, to time.Time) map[string]any {
	t.Helper()
	r := c.Post("/api/v2.0/data/statistics/", map[string]any{"start": from.UnixMilli(), "end": to.UnixMilli(),
		"variables": []any{map[string]any{"variable": s.VariableID}}, "aggregations": acrossAggs})
	if r.Status != 200 {
		t.Fatalf("statistics: %d %s", r.Status, r.Body)
	}
	var ans struct {
		Results []struct {
			Results map[string]any `json:"results"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &ans); err != nil || len(ans.Results) != 1 {
		t.Fatalf("statistics answer %s: %v", r.Body, err)
	}
	return ans.Results[0].Results
}

// checkReadsAcross: after retention removed the raw values before horizon, E7 over
// the same range answers as before from the tiers, also when its start lies inside a
// minute (rounded outward to it), with X-Raw-Horizon; a range after the horizon has no
// header; the value list starts at the horizon; the v1.6 statistic still counts every
// value.
func checkReadsAcross(t *testing.T, c *testenv.Client, s testenv.Seeded, before map[string]any, from, horizon time.Time) {
	t.Helper()
	to := from.Add(21 * 24 * time.Hour)
	for _, start := range []time.Time{from, from.Add(30*time.Second + 7*time.Millisecond)} {
		after := readAcross(t, c, s, start, to)
		for _, a := range acrossAggs {
			if !sameAggregate(before[a], after[a]) {
				t.Errorf("start %s: %s after retention %v, before %v", start.Format(time.RFC3339Nano), a, after[a], before[a])
			}
		}
	}
	body := map[string]any{"start": from.UnixMilli(), "end": to.UnixMilli(),
		"variables": []any{map[string]any{"variable": s.VariableID}}, "aggregations": []string{"count"}}
	if h := c.Post("/api/v2.0/data/statistics/", body).Header.Get("X-Raw-Horizon"); h != strconv.FormatInt(horizon.UnixMilli(), 10) {
		t.Errorf("X-Raw-Horizon %q, want %d", h, horizon.UnixMilli())
	}
	body["start"] = horizon.UnixMilli()
	if h := c.Post("/api/v2.0/data/statistics/", body).Header.Get("X-Raw-Horizon"); h != "" {
		t.Errorf("X-Raw-Horizon %q on a range after the horizon", h)
	}
	r := c.Get(fmt.Sprintf("/api/v1.6/variables/%s/values?start=%d&end=%d&page_size=10000", s.VariableID,
		from.UnixMilli(), to.UnixMilli()))
	var list struct {
		Results []struct {
			Timestamp int64 `json:"timestamp"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatalf("values %d %s: %v", r.Status, r.Body, err)
	}
	if n := len(list.Results); n == 0 || list.Results[n-1].Timestamp != horizon.UnixMilli() {
		t.Errorf("value list of %d values, want the oldest at the horizon %d: %.200s", n, horizon.UnixMilli(), r.Body)
	}
	stat := c.Get(fmt.Sprintf("/api/v1.6/variables/%s/statistics/count/%d/%d", s.VariableID, from.UnixMilli(), to.UnixMilli()))
	var got map[string]float64
	if err := json.Unmarshal(stat.Body, &got); err != nil || !sameAggregate(before["count"], map[string]any{"value": got["count"]}) {
		t.Errorf("v1.6 count after retention: %d %s, want %v", stat.Status, stat.Body, before["count"])
	}
}

// sameAggregate compares two E7 aggregate objects: timestamps exactly, values within
// 1e-9 relative (sums and spreads add up in another order from the tiers).
func sameAggregate(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		return false
	}
	if am["timestamp"] != bm["timestamp"] {
		return false
	}
	x, xok := am["value"].(float64)
	y, yok := bm["value"].(float64)
	if !xok || !yok {
		return am["value"] == bm["value"]
	}
	return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
}
