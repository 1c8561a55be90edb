package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sensordata/sensorapi/pkg/testenv"
)

// rollupDrift counts the (variable, minute) pairs where value_minutes differs from the
// rollup recomputed from "values" right now, over the whole database: every committed
// transaction keeps the two equal, whatever else runs.
func rollupDrift(t *testing.T) (drift, rollups int) {
	t.Helper()
	err := env.DB.NewRaw(`WITH truth AS (
		SELECT variable_id, time_bucket(INTERVAL '1 minute', ts) AS minute,
		       count(*)::int AS n, sum(value) AS sum, min(value) AS min, max(value) AS max
		FROM "values" GROUP BY 1, 2
	)
	SELECT count(*) FILTER (WHERE t.n IS DISTINCT FROM m.n OR t.min IS DISTINCT FROM m.min
	                          OR t.max IS DISTINCT FROM m.max OR t.sum IS NULL OR m.sum IS NULL
	                          OR abs(t.sum - m.sum) > 1e-9 * greatest(1, abs(t.sum))),
	       count(m.n)
	FROM truth t FULL JOIN value_minutes m USING (variable_id, minute)`).Scan(context.Background(), &drift, &rollups)
	if err != nil {
		t.Fatal(err)
	}
	return drift, rollups
}

// TestMinuteRollupsFollowEveryWrite drives every kind of write through the API (new
// dots, retries that replace values, concurrent writers sharing minutes, a range
// delete whose ends fall inside minutes, variable and device deletes) and checks the
// per-minute rollups the analytics read against the values after each step.
func TestMinuteRollupsFollowEveryWrite(t *testing.T) {
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
		if drift, n := rollupDrift(t); drift != 0 || (n == 0 && step == "new dots") {
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

	id := variableIDIn(t, c, "roll", "a")
	from, to := t0+7*60_000+12_345, t0+95*60_000+47_001 // both ends inside a minute
	if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, from, to)); r.Status != 204 && r.Status != 200 {
		t.Fatalf("delete range: %d %s", r.Status, r.Body)
	}
	check("range delete")
	var left int
	_ = env.DB.NewRaw(`SELECT count(*) FROM value_minutes m JOIN variables v ON v.id = m.variable_id
		WHERE v.public_id = ? AND m.minute > to_timestamp(?::float8 / 1000) AND m.minute + INTERVAL '1 minute' <= to_timestamp(?::float8 / 1000)`,
		id, from, to).Scan(context.Background(), &left)
	if left != 0 {
		t.Fatalf("%d rollups left inside the deleted range", left)
	}

	if r := c.Delete("/api/v2.0/variables/" + variableIDIn(t, c, "roll", "b")); r.Status != 204 {
		t.Fatalf("delete variable: %d %s", r.Status, r.Body)
	}
	check("variable delete")
	if r := c.Delete("/api/v2.0/devices/~roll"); r.Status != 204 {
		t.Fatalf("delete device: %d %s", r.Status, r.Body)
	}
	check("device delete")
}

// variableIDIn reads a variable's public id through the API.
func variableIDIn(t *testing.T, c *testenv.Client, device, variable string) string {
	t.Helper()
	r := c.Get("/api/v2.0/devices/~" + device + "/variables/~" + variable)
	if r.Status != 200 {
		t.Fatalf("variable %s/%s: %d %s", device, variable, r.Status, r.Body)
	}
	return r.Object(t)["id"].(string)
}
