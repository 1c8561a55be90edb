package values_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRetentionOfPackedDays: retention drops the chunks of packed days as it drops
// rows' chunks, counts their values, records the horizon, and gives the dropped days
// their minute tiles back, so that E7 over a range reaching before the horizon answers
// exactly as before (API.md §16).
func TestRetentionOfPackedDays(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	var points []testenv.Point
	for ts := t0; ts.Before(t0.Add(21 * day)); ts = ts.Add(10 * time.Minute) {
		points = append(points, testenv.Point{TS: ts.UnixMilli(), Value: float64(ts.Unix()%1000) / 7})
	}
	s := env.Seed(t, env.AdminToken, "retention-packed", "v", points)
	c := env.Client(t).As(env.AdminToken)
	end := t0.Add(21 * day)
	ranges := [][2]time.Time{{t0, end}, {t0.Add(3*day + 17*time.Minute), t0.Add(15*day + 4*time.Minute)}}
	var before []map[string]any
	for _, r := range ranges {
		before = append(before, statistics(t, c, s.VariableID, r[0], r[1]))
	}
	if res, err := packer().Run(ctx); err != nil || res.Days < 21 {
		t.Fatalf("pack: %+v %v", res, err)
	}
	if n := count(t, `SELECT count(*) FROM "values" WHERE variable_id = $1`, s.VariableKey); n != 0 {
		t.Fatalf("%d rows left after packing", n)
	}
	horizon := t0.Add(14 * day)
	// every value in the database, both layouts: the run may drop other tests' old days too
	const allPoints = `SELECT (SELECT count(*) FROM "values") + (SELECT coalesce(sum(n), 0) FROM values_packed)`
	pointsBefore := count(t, allPoints)
	ownBefore := count(t, `SELECT coalesce(sum(n), 0) FROM values_packed WHERE variable_id = $1`, s.VariableKey)
	res, err := retention.Run(ctx, env.DB.Pool, retention.Options{Raw: 7 * day,
		Now: func() time.Time { return horizon.Add(7*day + time.Hour) }})
	if err != nil || len(res.RawChunks) == 0 {
		t.Fatalf("retention: %+v %v", res, err)
	}
	h, ok, err := retention.Horizon(ctx, env.DB.Pool)
	if err != nil || !ok || h.After(horizon) || h.Before(horizon.Add(-7*day)) {
		t.Fatalf("horizon %s %v %v, want a chunk boundary by %s", h, ok, err, horizon)
	}
	dropped := count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1 AND day < $2`, s.VariableKey, h)
	if removed := pointsBefore - count(t, allPoints); dropped != 0 || int64(removed) != res.RowsRemoved {
		t.Fatalf("%d packed days left before the horizon; %d values removed, the run says %d", dropped, removed, res.RowsRemoved)
	}
	removed := ownBefore - count(t, `SELECT coalesce(sum(n), 0) FROM values_packed WHERE variable_id = $1`, s.VariableKey)
	if removed == 0 {
		t.Fatal("none of the variable's values were removed")
	}
	// the dropped days' minutes are back: one tile per value (a value every 10 minutes)
	if n := count(t, `SELECT count(*) FROM value_minutes WHERE variable_id = $1 AND tile < $2`, s.VariableKey, h); n != removed {
		t.Fatalf("%d minute tiles before the horizon, want %d", n, removed)
	}
	c = env.Client(t).As(env.AdminToken) // a new instance: no cached horizon
	for i, r := range ranges {
		after := statistics(t, c, s.VariableID, r[0], r[1])
		for agg, want := range before[i] {
			if !sameAnswer(want, after[agg]) {
				t.Errorf("range %d: %s after retention %v, before %v", i, agg, after[agg], want)
			}
		}
	}
}

// statistics asks E7 for every aggregation but the percentiles (which need every raw
// value: past the horizon there are none).
func statistics(t *testing.T, c *testenv.Client, id string, from, to time.Time) map[string]any {
	t.Helper()
	r := c.Post("/api/v2.0/data/statistics/", map[string]any{"start": from.UnixMilli(), "end": to.UnixMilli(),
		"variables":    []any{map[string]any{"variable": id}},
		"aggregations": []string{"first", "last", "min", "max", "count", "sum", "mean", "std"}})
	if r.Status != 200 {
		t.Fatalf("statistics: %d %s", r.Status, r.Body)
	}
	var ans struct {
		Results []struct {
			Results map[string]any `json:"results"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &ans); err != nil || len(ans.Results) != 1 || len(ans.Results[0].Results) == 0 {
		t.Fatalf("statistics answer %s: %v", r.Body, err)
	}
	return ans.Results[0].Results
}

// sameAnswer compares two aggregates ({value[, timestamp]}) within 1e-9 relative.
func sameAnswer(a, b any) bool {
	am, ok1 := a.(map[string]any)
	bm, ok2 := b.(map[string]any)
	if !ok1 || !ok2 || am["timestamp"] != bm["timestamp"] {
		return false
	}
	av, ok1 := am["value"].(float64)
	bv, ok2 := bm["value"].(float64)
	if !ok1 || !ok2 {
		return am["value"] == bm["value"]
	}
	return av == bv || math.Abs(av-bv) <= 1e-9*max(math.Abs(av), math.Abs(bv))
}
