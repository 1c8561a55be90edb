package synthetic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/synthetic"
)

// TestRecomputeReadsNearTheChange: a live recompute is bounded by the change, not by
// the input's history. Over an input with 200 days of values, the statements that
// recompute its last hour — shift and diff (which need the values just before it), a
// window whose grid starts at the input's first value (which needs that value) and one
// whose grid does not — read a few rows from the tables, where reading the history
// (as the first-value and previous-value lookups once did) reads all 57,600.
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
	for _, expr := range []string{"shift({{h.x}}, 3)", "diff({{h.x}})", `mean({{h.x}}, "1H", "Europe/Berlin")`, `max({{h.x}}, "6H")`} {
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
	ctx := context.Background()
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
	checked, err := synthetic.Check(ctx, env.DB.Pool, keys, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range checked {
		for _, d := range ch.Differences {
			t.Errorf("%s at %s: stored %v, computed %v", ch.Name, time.UnixMilli(d.TS).UTC(), deref(d.Stored), deref(d.Computed))
		}
	}
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
