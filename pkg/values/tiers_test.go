package values_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestTiersFollowEveryWrite drives every kind of write through the API (new
// dots, retries that replace values, concurrent writers sharing minutes, a range
// delete whose ends fall inside minutes, variable and device deletes) and checks the
// per-minute rollups the analytics read against the values after each step.
func TestTiersFollowEveryWrite(t *testing.T) {
	scope := env.NewDriftScope(t)
	c := env.Client(t).As(env.NewAccount(t))
	rng := rand.New(rand.NewPCG(7, 7))
	const t0 = int64(1767225600000) // 2026-01-01T00:00Z
	// irregular dots, a few a minute, values of both signs
	dots := func(n int, from, gapMs int64) []any {
		out := make([]any, n)
		ts := from
		for i := range out {
			ts += 1 + rng.Int64N(gapMs)
			out[i] = map[string]any{"value": rng.Float64()*200 - 100, "timestamp": ts}
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		if drift, n := env.RollupDrift(t, scope); drift != 0 || (n == 0 && step == "new dots") {
			t.Fatalf("after %s: %d of %d minute rollups differ from the values", step, drift, n)
		}
	}
	post := func(path string, body any) {
		t.Helper()
		if r := c.Post(path, body); r.Status != 200 && r.Status != 201 {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
	}

	first := dots(600, t0, 20_000)
	post("/api/v1.6/devices/roll/", map[string]any{"a": first, "b": dots(300, t0, 40_000), "c": dots(50, t0, 40_000)})
	check("new dots")

	// a retry of part of the batch with new values: the minutes' min and max must be
	// able to move both ways, which adding cannot do
	retry := make([]any, 0, 200)
	for i := 100; i < 300; i++ {
		d := first[i].(map[string]any)
		retry = append(retry, map[string]any{"value": -d["value"].(float64) * 3, "timestamp": d["timestamp"]})
	}
	post("/api/v1.6/devices/roll/a/values", retry)
	check("replacing dots")

	// writers racing on the same minutes of one variable, some on the same timestamps
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 5 {
				batch := make([]any, 40)
				for i := range batch {
					ts := t0 + int64((w*7+k*13+i*29)%3600)*1000 // one hour, overlapping
					batch[i] = map[string]any{"value": float64(w*100 + i), "timestamp": ts}
				}
				if r := c.Post("/api/v1.6/devices/roll/a/values", batch); r.Status != 201 {
					t.Errorf("writer %d: %d %s", w, r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	check("concurrent writers")

	id := c.VariableID("roll", "a")
	from, to := t0+7*60_000+12_345, t0+95*60_000+47_001 // both ends inside a minute
	if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, from, to)); r.Status != 204 && r.Status != 200 {
		t.Fatalf("delete range: %d %s", r.Status, r.Body)
	}
	check("range delete")
	// a delete of one whole minute: its rollup must go, not stay with n = 0
	whole := t0 + 3*60_000 // holds values of the first batch and of the racing writers
	if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, whole, whole+59_999)); r.Status != 204 && r.Status != 200 {
		t.Fatalf("delete minute: %d %s", r.Status, r.Body)
	}
	check("one-minute delete")
	var left int
	_ = env.DB.NewRaw(`SELECT count(*) FROM value_minutes m JOIN variables v ON v.id = m.variable_id
		WHERE v.public_id = ? AND m.tile > to_timestamp(?::float8 / 1000) AND m.tile + INTERVAL '1 minute' <= to_timestamp(?::float8 / 1000)`,
		id, from, to).Scan(context.Background(), &left)
	if left != 0 {
		t.Fatalf("%d rollups left inside the deleted range", left)
	}

	if r := c.Delete("/api/v2.0/variables/" + c.VariableID("roll", "b")); r.Status != 204 {
		t.Fatalf("delete variable: %d %s", r.Status, r.Body)
	}
	check("variable delete")
	if r := c.Delete("/api/v2.0/devices/~roll"); r.Status != 204 {
		t.Fatalf("delete device: %d %s", r.Status, r.Body)
	}
	check("device delete")
}

// TestRebuildTiersRepairsDrift: rollups left wrong by writes outside the write path
// (values inserted by hand, a binary without rollups) are recomputed by
// RebuildMinutes, from its since minute on only.
func TestRebuildTiersRepairsDrift(t *testing.T) {
	scope := env.NewDriftScope(t)
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	const t0 = int64(1767225600000)
	s := env.Seed(t, c.Token, "drift", "v", testenv.DenseAcrossEpoch(600))
	since := time.UnixMilli(t0).UTC()
	for _, q := range []string{
		// before since: stays wrong
		`UPDATE value_minutes SET n = n + 1 WHERE variable_id = ? AND tile = (SELECT min(tile) FROM value_minutes WHERE variable_id = ?)`,
		// from since on: two values written around the write path, their tiles missing
		// (two minutes, two quarters and a day)
		`INSERT INTO "values" (variable_id, ts, value) VALUES (?, '2026-01-01T00:10:00.5Z', 1), (?, '2026-01-01T00:20:00Z', 2)`,
	} {
		if _, err := env.DB.ExecContext(ctx, q, s.VariableKey, s.VariableKey); err != nil {
			t.Fatal(err)
		}
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 6 {
		t.Fatalf("%d rollups drifted, want the 6 made here", drift)
	}
	st := &values.Store{Pool: env.DB.Pool}
	var calls int
	if err := st.RebuildTiers(ctx, since, func(done, total int) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 1 || calls == 0 {
		t.Fatalf("after rebuilding since %v: %d rollups differ (want the 1 before it), %d progress calls", since, drift, calls)
	}
	if err := st.RebuildTiers(ctx, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 0 {
		t.Fatalf("after rebuilding all: %d rollups differ", drift)
	}
}
