package synthetic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRecomputeReadsNearTheChange: a live recompute is bounded by the change, not by
// the input's history. Over an input with 200 days of values, the statements that
// recompute its last hour — shift and diff (which need the values just before it), a
// window whose grid starts at the input's first value (which needs that value), one
// whose grid does not, and a running sum (which carries on from its own stored value) —
// read a few rows from the tables, where reading the history (as the first-value and
// previous-value lookups and the running sum once did) reads all 57,600.
func TestRecomputeReadsNearTheChange(t *testing.T) {
	ctx := context.Background()
	c := withDevice(t, "h")
	x := keyOf(t, mustStatus(t, c.Post("/api/v2.0/devices/~h/variables/", map[string]any{"label": "x"}), 201)["id"].(string))
	end := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const history = 200 * 24 * 12 // every 5 minutes
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value)
		SELECT $1, $2::timestamptz - i * interval '5 minutes', i % 97 FROM generate_series(1, $3) AS i`, x, end, history); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Pool.Exec(ctx, `ANALYZE "values"`); err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{"shift({{h.x}}, 3)", "diff({{h.x}})", `mean({{h.x}}, "1H", "Europe/Berlin")`, `max({{h.x}}, "6H")`, "cumsum({{h.x}})"} {
		r := mustStatus(t, c.Post("/api/v2.0/devices/~h/variables/", map[string]any{"label": "s", "syntheticExpression": expr}), 201)
		key := keyOf(t, r["id"].(string))
		read := rowsRead(t, key, end.Add(-time.Hour).UnixMilli(), end.UnixMilli())
		if read == 0 || read > 500 {
			t.Errorf("%s: a recompute of the last hour read %.0f rows of %d", expr, read, history)
		}
		mustStatus(t, c.Delete("/api/v2.0/variables/"+r["id"].(string)), 204)
	}
}

// rowsRead runs the recompute of key over [from, to] under EXPLAIN ANALYZE (rolled
// back) and sums the rows that its scans of tables returned.
func rowsRead(t *testing.T, key, from, to int64) float64 {
	t.Helper()
	ctx := context.Background()
	tx, err := env.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	stmts, err := synthetic.RecomputeStatements(ctx, tx, key, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, q := range stmts {
		var plan []struct{ Plan node }
		var raw []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.SQL, append([]any{pgx.QueryExecModeSimpleProtocol}, q.Args...)...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		total += plan[0].Plan.scanned()
	}
	return total
}

type node struct {
	Relation string  `json:"Relation Name"`
	Rows     float64 `json:"Actual Rows"`
	Loops    float64 `json:"Actual Loops"`
	Plans    []node  `json:"Plans"`
}

// scanned is the rows the plan's scans of tables returned, over all their loops.
func (n node) scanned() float64 {
	s := 0.0
	if n.Relation != "" {
		s = n.Rows * n.Loops
	}
	for _, c := range n.Plans {
		s += c.scanned()
	}
	return s
}

// TestCalendarWindowsLive: late values into the middle of a month, a week and a day
// (Berlin's change to summer time among them) are recomputed from their whole buckets:
// afterwards every stored value equals the recomputation, and the values changed.
// (The live recompute reads only the buckets holding the change: a read that started
// too late in the month would sum part of it.)
func TestCalendarWindowsLive(t *testing.T) {
	c := withDevice(t, "cal")
	post := func(pts map[int64]float64) {
		t.Helper()
		body := make([]map[string]any, 0, len(pts))
		for ts, v := range pts {
			body = append(body, map[string]any{"timestamp": ts, "value": v})
		}
		if r := c.Post("/api/v1.6/devices/cal/x/values", body); r.Status != 201 {
			t.Fatalf("post values: %d %.300s", r.Status, r.Body)
		}
	}
	history := map[int64]float64{}
	for ts, i := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0; ts.Before(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)); ts, i = ts.Add(6*time.Hour), i+1 {
		history[ts.UnixMilli()] = float64(i % 13)
	}
	post(history)
	var keys []int64
	for i, expr := range []string{`sum({{cal.x}}, "M", "Europe/Berlin")`, `mean({{cal.x}}, "W", "Asia/Kathmandu")`, `max({{cal.x}}, "1D", "Europe/Berlin")`} {
		r := mustStatus(t, c.Post("/api/v2.0/devices/~cal/variables/", map[string]any{"label": fmt.Sprintf("s%d", i), "syntheticExpression": expr}), 201)
		keys = append(keys, keyOf(t, r["id"].(string)))
	}
	quiesce(t, 30*time.Second)
	before := storedSum(t, keys)
	post(map[int64]float64{
		time.Date(2026, 2, 14, 12, 34, 0, 0, time.UTC).UnixMilli(): 500,
		time.Date(2026, 3, 18, 9, 0, 0, 0, time.UTC).UnixMilli():   700,
		time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC).UnixMilli():  900,
	})
	quiesce(t, 30*time.Second)
	if after := storedSum(t, keys); after == before {
		t.Fatalf("the late values changed nothing (%v)", after)
	}
	matchesRecomputation(t, keys)
}

// storedSum is the sum of the variables' stored values.
func storedSum(t *testing.T, keys []int64) float64 {
	t.Helper()
	var s float64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(value), 0) FROM "values" WHERE variable_id = ANY($1)`, keys).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunningSumCarriesOn: a live recompute of cumsum({{x}}) after new values carries
// the sum on from its own stored value (TestRecomputeReadsNearTheChange: it reads no
// history): the new values' sums count everything before them; a late value before
// them moves every later sum; and a sum that left the doubles (no stored value to carry)
// stays without values, as the recomputation over the whole history gives.
func TestRunningSumCarriesOn(t *testing.T) {
	c := withDevice(t, "run")
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	post := func(label string, pts map[int64]float64) {
		t.Helper()
		body := make([]map[string]any, 0, len(pts))
		for ts, v := range pts {
			body = append(body, map[string]any{"timestamp": ts, "value": v})
		}
		if r := c.Post("/api/v1.6/devices/run/"+label+"/values", body); r.Status != 201 {
			t.Fatalf("post values: %d %.300s", r.Status, r.Body)
		}
	}
	first := map[int64]float64{}
	for i := range 100 {
		first[base+int64(i)*60_000] = float64(i%7) + 0.25
	}
	post("x", first)
	post("big", map[int64]float64{base: 1e308, base + 60_000: 1e308})
	var keys []int64
	for _, in := range []string{"x", "big"} {
		r := mustStatus(t, c.Post("/api/v2.0/devices/~run/variables/", map[string]any{"label": "sum_" + in, "syntheticExpression": "cumsum({{run." + in + "}})"}), 201)
		keys = append(keys, keyOf(t, r["id"].(string)))
	}
	quiesce(t, 30*time.Second)
	sum := 0.0
	for i := range 100 {
		sum += first[base+int64(i)*60_000]
	}
	later := base + 200*60_000
	post("x", map[int64]float64{later: 10})
	post("big", map[int64]float64{later: 5})
	quiesce(t, 30*time.Second)
	if got := storedByTS(t, keys[0]); got[later] != sum+10 {
		t.Errorf("the running sum at the new value is %v, want %v", got[later], sum+10)
	}
	if got := storedByTS(t, keys[1]); len(got) != 1 || got[base] != 1e308 {
		t.Errorf("a running sum past the largest double after its first value has values %v", got)
	}
	post("x", map[int64]float64{base + 150*60_000: 100}) // late, before the newest
	quiesce(t, 30*time.Second)
	if got := storedByTS(t, keys[0]); got[later] != sum+110 || got[base+150*60_000] != sum+100 {
		t.Errorf("after a late value the sums are %v and %v, want %v and %v", got[base+150*60_000], got[later], sum+100, sum+110)
	}
	// a recompute after q while the one from p, just before it, is still to do (its value
	// written behind the upkeep's back, the to-do rows due in an hour: only this step
	// takes q's): nothing stored at p to carry on from, so the sum is taken from the first
	ctx := context.Background()
	p, q := base+300*60_000, base+301*60_000
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value) VALUES
		($1, to_timestamp($2::bigint / 1000.0), 1000), ($1, to_timestamp($3::bigint / 1000.0), 2000)`, xKey(t, c), p, q); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := env.DB.Pool.QueryRow(ctx, `WITH ins AS (INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts, not_before)
		VALUES ($1, $2, $4, now() + interval '1 hour'), ($1, $3, $4, now() + interval '1 hour') RETURNING id)
		SELECT array_agg(id ORDER BY id) FROM ins`, keys[0], p, q, synthetic.MaxTimestamp).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	u := synthetic.NewUpkeep(env.DB.Pool, env.Log, nil)
	if did, err := u.StepRows(ctx, ids[1:]); !did || err != nil {
		t.Fatalf("step: did %v, err %v", did, err)
	}
	if got := storedByTS(t, keys[0]); got[q] != sum+3110 {
		t.Errorf("the running sum at q, before p's recompute, is %v, want %v", got[q], sum+3110)
	}
	if did, err := u.StepRows(ctx, ids[:1]); !did || err != nil {
		t.Fatalf("step: did %v, err %v", did, err)
	}
	matchesRecomputation(t, keys)
}

// xKey is the key of the variable x of the client's device run.
func xKey(t *testing.T, c *testenv.Client) int64 {
	t.Helper()
	return keyOf(t, mustStatus(t, c.Get("/api/v2.0/devices/~run/variables/~x"), 200)["id"].(string))
}

// storedByTS is the variable's stored values by timestamp (ms).
func storedByTS(t *testing.T, key int64) map[int64]float64 {
	t.Helper()
	out := map[int64]float64{}
	for _, v := range storedValues(t, key) {
		out[int64(v[0])] = v[1]
	}
	return out
}
