package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"
)

// The analytics oracle: E7 (statistics) answered by hand-written SQL straight from the
// raw values, which knows nothing of querybuilder/ or of any rollup table, and the
// comparison of E7 answers with it. pkg/api's property tests (TestTiersProperty and
// the fixture suites beside it) and pkg/values' TestTilesFollowTheMark use it.

// Var is a seeded variable: its public id, its internal key (for the reference SQL)
// and its points.
type Var struct {
	ID  string
	Key int64
	Pts []Point
}

// SummaryAggs are E7's aggregations without the percentiles, which need every value.
var SummaryAggs = []string{"first", "last", "min", "max", "count", "sum", "mean", "std"}

// RefMs is the reference SQL's timestamp in epoch milliseconds (a format with one %s:
// a timestamptz expression). Timestamps are compared in epoch milliseconds.
const RefMs = `(extract(epoch FROM %s) * 1000)::bigint`

// RefTime is the instant of ms (epoch milliseconds), a parameter of the reference SQL.
func RefTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// rowRefValues is the rows of "values": what the reference SQL reads by default.
func rowRefValues(_ string) string { return `"values"` }

// PackedRefValues are both layouts of the raw values: their decoding (packed_values) is
// checked bit for bit by pkg/values' tests, and the answers against pandas by pkg/api's
// TestTiersProperty.
func PackedRefValues(keys string) string {
	return `(SELECT variable_id, ts, value FROM "values"
	UNION ALL SELECT variable_id, ts, value FROM packed_values(` + keys + `, $2, $3))`
}

// RefValues is what the reference SQL reads (keys: its variables as an array; $2 and
// $3 its range): rowRefValues, or PackedRefValues once a test has packed days (it sets
// it and restores it; not while another test reads it).
var RefValues = rowRefValues

// RefStatistics is E7 straight from the raw values (RefValues), one statement per
// variable: the plain aggregates, percentile_cont, first/last by time, the earliest
// timestamp holding the min and the max, and the sample standard deviation in two
// passes (the mean first, then the squared deviations from it: exact to the last digits
// for 1e6 ± 0.01). Its answer is shaped as E7's results, decoded by DecodeNumbers.
func (e *Env) RefStatistics(t testing.TB, vars map[string]*Var, names []string, start, end int64) any {
	t.Helper()
	q := fmt.Sprintf(`WITH x AS (
		SELECT ts, value FROM `+RefValues("ARRAY[$1::bigint]")+` WHERE variable_id = $1 AND ts BETWEEN $2 AND $3
	), s AS (
		SELECT count(*) AS n, sum(value) AS sum, avg(value) AS mean, min(value) AS min, max(value) AS max,
		       percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY value) AS p,
		       first(value, ts) AS first, last(value, ts) AS last, min(ts) AS first_ts, max(ts) AS last_ts
		FROM x
	)
	SELECT s.n, s.sum, s.mean, s.min, s.max, s.p[1], s.p[2], s.p[3], s.first, s.last, %s, %s,
	       (SELECT %s FROM x WHERE x.value = s.min), (SELECT %s FROM x WHERE x.value = s.max),
	       CASE WHEN s.n > 1 THEN (SELECT sqrt(sum((x.value - s.mean) * (x.value - s.mean)) / (s.n - 1)) FROM x) END
	FROM s`, fmt.Sprintf(RefMs, "s.first_ts"), fmt.Sprintf(RefMs, "s.last_ts"),
		fmt.Sprintf(RefMs, "min(x.ts)"), fmt.Sprintf(RefMs, "min(x.ts)"))
	out := make([]any, len(names))
	for i, n := range names {
		var count int64
		var sum, mean, mn, mx, p25, p50, p75, first, last, std *float64
		var firstTS, lastTS, minTS, maxTS *int64
		err := e.DB.Pool.QueryRow(context.Background(), q, vars[n].Key, RefTime(start), RefTime(end)).Scan(
			&count, &sum, &mean, &mn, &mx, &p25, &p50, &p75, &first, &last, &firstTS, &lastTS, &minTS, &maxTS, &std)
		if err != nil {
			t.Fatalf("reference statistics: %v", err)
		}
		if count == 0 {
			out[i] = map[string]any{}
			continue
		}
		val := func(v *float64) map[string]any { return map[string]any{"value": v} }
		at := func(v *float64, ts *int64) map[string]any { return map[string]any{"value": v, "timestamp": ts} }
		out[i] = map[string]any{
			"first": at(first, firstTS), "last": at(last, lastTS), "min": at(mn, minTS), "max": at(mx, maxTS),
			"count": map[string]any{"value": count}, "sum": val(sum), "mean": val(mean), "std": val(std),
			"p25": val(p25), "p50": val(p50), "p75": val(p75),
		}
	}
	return AsNumbers(t, out)
}

// PostStatistics asks E7 (through c) for aggs of names over [start, end] and returns
// each entry's results, in request order.
func PostStatistics(t testing.TB, c *Client, vars map[string]*Var, names []string, start, end int64, aggs []string) []any {
	t.Helper()
	refs := make([]any, len(names))
	for i, n := range names {
		refs[i] = map[string]any{"variable": vars[n].ID}
	}
	r := c.Post("/api/v2.0/data/statistics/", map[string]any{"start": start, "end": end, "variables": refs, "aggregations": aggs})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	ans, _ := DecodeNumbers(t, r.Body).(map[string]any)
	entries, _ := ans["results"].([]any)
	if len(entries) != len(names) {
		t.Fatalf("%d results for %d variables: %s", len(entries), len(names), r.Body)
	}
	out := make([]any, len(entries))
	for i, e := range entries {
		m, _ := e.(map[string]any)
		if fmt.Sprint(m["code"]) != "200" {
			t.Fatalf("results[%d]: %s", i, r.Body)
		}
		out[i] = m["results"]
	}
	return out
}

// SameStatistics compares E7 results (one object per variable) on aggs, which got must
// hold exactly (none when want is empty): timestamps equal, values within 1e-9
// relative, nulls alike.
// std alone may be off by stdTol relative (see CheckStatistics).
func SameStatistics(want, got any, aggs []string, stdTol float64) error {
	w, okW := want.([]any)
	g, okG := got.([]any)
	if !okW || !okG || len(w) != len(g) {
		return fmt.Errorf("%d entries, want %d", len(g), len(w))
	}
	for i := range w {
		wm, okW := w[i].(map[string]any)
		gm, okG := g[i].(map[string]any)
		if !okW || !okG || (len(wm) == 0) != (len(gm) == 0) || (len(wm) > 0 && len(gm) != len(aggs)) {
			return fmt.Errorf("[%d]: aggregations %v, want %v of %v", i, sortedKeys(gm), aggs, sortedKeys(wm))
		}
		if len(wm) == 0 {
			continue
		}
		for _, agg := range aggs {
			wa, _ := wm[agg].(map[string]any)
			ga, ok := gm[agg].(map[string]any)
			if !ok || len(wa) != len(ga) {
				return fmt.Errorf("[%d].%s: %v, want %v", i, agg, gm[agg], wm[agg])
			}
			if err := SameScalar(wa["value"], ga["value"], false); err != nil && (agg != "std" || !within(wa["value"], ga["value"], stdTol)) {
				return fmt.Errorf("[%d].%s: %w", i, agg, err)
			}
			if ts, ok := wa["timestamp"]; ok {
				if err := SameScalar(ts, ga["timestamp"], true); err != nil {
					return fmt.Errorf("[%d].%s: %w", i, agg, err)
				}
			}
		}
	}
	return nil
}

// CheckStatistics fails t unless got equals want (SameStatistics, 1e-9 relative: std
// too, with or without percentiles, for values like 1e6 ± 0.01).
func CheckStatistics(t testing.TB, what string, want, got any, aggs []string) {
	t.Helper()
	if err := SameStatistics(want, got, aggs, 1e-9); err != nil {
		b, _ := json.Marshal(got) // decoded JSON: it marshals
		t.Errorf("%s: %v\n got %s", what, err, b)
	}
}

// SameScalar compares two decoded JSON scalars (DecodeNumbers): nulls alike, else
// json.Numbers equal when exact (timestamps) or within 1e-9 relative.
func SameScalar(want, got any, exact bool) error {
	if want == nil || got == nil {
		if want != got {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		return nil
	}
	wn, okW := want.(json.Number)
	gn, okG := got.(json.Number)
	if !okW || !okG {
		return fmt.Errorf("got %v, want %v", got, want)
	}
	if exact {
		wi, err1 := wn.Int64()
		gi, err2 := gn.Int64()
		if err1 != nil || err2 != nil || wi != gi {
			return fmt.Errorf("timestamp %s, want %s", gn, wn)
		}
		return nil
	}
	wf, _ := wn.Float64()
	gf, _ := gn.Float64()
	if math.Abs(wf-gf) > 1e-9*math.Max(math.Abs(wf), math.Abs(gf)) {
		return fmt.Errorf("value %s, want %s", gn, wn)
	}
	return nil
}

// within tells whether two JSON numbers are within tol relative.
func within(want, got any, tol float64) bool {
	wn, okW := want.(json.Number)
	gn, okG := got.(json.Number)
	if !okW || !okG {
		return false
	}
	wf, _ := wn.Float64()
	gf, _ := gn.Float64()
	return math.Abs(wf-gf) <= tol*math.Max(math.Abs(wf), math.Abs(gf))
}

// DecodeNumbers decodes JSON with its numbers as json.Number, failing t when raw is not
// JSON.
func DecodeNumbers(t testing.TB, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// AsNumbers turns v into what DecodeNumbers gives for its JSON.
func AsNumbers(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return DecodeNumbers(t, b)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
