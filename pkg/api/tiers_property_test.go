package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// The acceptance property test of the analytics (E7 statistics, E8 resample, E9
// aggregation), whatever the compiler reads to answer them (raw values, minute rollups,
// coarser tiers mixed with raw values at the range's millisecond edges): every answer
// must equal both
//
//   - the pandas/numpy answer of testdata/tiers/fixtures.json (gen.py beside it: random
//     ranges with random millisecond edges, every aggregation, every period in six zones
//     including their DST days), and
//   - the answer of the hand-written SQL below, run directly on the raw "values" table:
//     time_bucket and AT TIME ZONE, avg, a two-pass standard deviation, percentile_cont,
//     first/last. It knows nothing of querybuilder/ or of any rollup table.
//
// A seeded loop of further random requests (more periods, zones and ranges than the
// fixtures hold) is compared with the reference SQL alone.
//
// Timestamps must be equal; values equal within 1e-9 relative (sameResults). The points
// are written through the HTTP API, so whatever the write path maintains is maintained.

// tiersFixture is testdata/tiers/fixtures.json.
type tiersFixture struct {
	Points      map[string][][2]json.Number `json:"points"`
	Statistics  []parityCase                `json:"statistics"`
	Resample    []parityCase                `json:"resample"`
	Aggregation []parityCase                `json:"aggregation"`
	TZ          tzRecord                    `json:"tz"`
}

// tiersVar is a seeded variable: its public id, its internal key (for the reference
// SQL) and its points.
type tiersVar struct {
	id  string
	key int64
	pts []testenv.Point
}

// tiersZones are the zones of the random loop (the fixtures' zones).
var tiersZones = []string{"UTC", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe", "America/St_Johns", "Europe/Berlin"}

var tiersStatAggs = []string{"first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"}

// tiersSummaryAggs are E7's aggregations without the percentiles, which need every value.
var tiersSummaryAggs = []string{"first", "last", "min", "max", "count", "sum", "mean", "std"}

var tiersAggs = []string{"mean", "min", "max", "count", "sum"}

func TestTiersProperty(t *testing.T) {
	t.Parallel() // its own account, read-only once seeded
	var fx tiersFixture
	loadFixture(t, "testdata/tiers/fixtures.json", &fx)
	if len(fx.Statistics) == 0 || len(fx.Resample) == 0 || len(fx.Aggregation) == 0 {
		t.Fatal("the fixture has no cases; regenerate it with testdata/tiers/gen.py")
	}
	c := env.Client(t).As(env.NewAccount(t))
	vars := seedTiers(t, c, fx.Points)
	differ := tzRules(t, "tiers/fixtures.json", fx.TZ)
	logTzRules(t, "tiers/fixtures.json", fx.TZ, differ)

	t.Run("rows", func(t *testing.T) { tiersCases(t, c, vars, fx, differ) })

	// the same answers once every day is packed (issue 32): pandas' and the reference
	// SQL's over both layouts (only the fixture's variables are packed: other tests of
	// this package count their rows)
	packVars(t, vars) // fails when no day was packed
	var left int
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM "values" WHERE variable_id = $1`,
		vars["a"].key).Scan(&left); err != nil || left != 0 {
		t.Fatalf("packing: %d rows of a left (%v)", left, err)
	}
	rowsRef := refValues
	refValues = packedRefValues
	defer func() { refValues = rowsRef }()
	t.Run("packed", func(t *testing.T) { tiersCases(t, c, vars, fx, differ) })
}

// tiersCases compares the answers to every fixture case and the random requests with
// pandas and the reference SQL.
func tiersCases(t *testing.T, c *testenv.Client, vars map[string]*tiersVar, fx tiersFixture, differ map[string]*tzDisagreement) {
	t.Run("statistics", func(t *testing.T) {
		for _, pc := range fx.Statistics {
			t.Run(pc.Name, func(t *testing.T) {
				c := parallelCase(t, c)
				names := caseVars(pc.Body)
				start, end := caseMs(t, pc.Body, "start"), caseMs(t, pc.Body, "end")
				want, ref := decodeNumbers(t, pc.Expected), refStatistics(t, vars, names, start, end)
				if err := sameStatistics(want, ref, tiersStatAggs, 1e-9); err != nil {
					t.Fatalf("the reference SQL disagrees with pandas (a bug of this test): %v", err)
				}
				// with and without percentiles: the plans differ (raw rows or summaries)
				for _, aggs := range [][]string{tiersStatAggs, tiersSummaryAggs} {
					got := tiersStatistics(t, c, vars, names, start, end, aggs)
					checkStatistics(t, fmt.Sprintf("%v against pandas", aggs), want, got, aggs)
					checkStatistics(t, fmt.Sprintf("%v against the reference SQL", aggs), ref, got, aggs)
				}
			})
		}
	})
	for _, kind := range []struct {
		name, path string
		cases      []parityCase
	}{{"resample", resamplePath, fx.Resample}, {"aggregation", aggregationPath, fx.Aggregation}} {
		t.Run(kind.name, func(t *testing.T) {
			for _, pc := range kind.cases {
				t.Run(pc.Name, func(t *testing.T) {
					c := parallelCase(t, c)
					got := tiersPost(t, c, kind.path, pc.Body, vars)
					if why := tzRulesDiffer(t, pc, fx.TZ, differ); why != "" {
						t.Logf("not compared with pandas: %s", why)
					} else if err := sameResults(decodeNumbers(t, pc.Expected), got); err != nil {
						t.Errorf("against pandas: %v\nbody %v\n got %s\nwant %s", err, pc.Body, mustJSON(t, got), pc.Expected)
					}
					if err := sameResults(refAnalytics(t, vars, pc.Body), got); err != nil {
						t.Errorf("against the reference SQL: %v\nbody %v\n got %s", err, pc.Body, mustJSON(t, got))
					}
				})
			}
		})
	}
	t.Run("random", func(t *testing.T) { tiersRandom(t, c, vars) })
}

// tiersRandom sends seeded random E7, E8 and E9 requests and compares each answer with
// the reference SQL: any n of minutes (1-180), hours (1-48) and days (1-10), W and M,
// in the six zones, ranges from a second to months with millisecond edges.
func tiersRandom(t *testing.T, c *testenv.Client, vars map[string]*tiersVar) {
	rng := rand.New(rand.NewPCG(20261124, 17))
	names := []string{"a", "b", "c", "d"}
	subset := func(max int) []string {
		perm := rng.Perm(len(names))[:1+rng.IntN(max)]
		out := make([]string, len(perm))
		for i, p := range perm {
			out[i] = names[p]
		}
		if rng.IntN(10) == 0 {
			out = append(out, "empty")
			rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		}
		return out
	}
	const minute, day = int64(60_000), int64(86_400_000)
	period := func() (string, int64) {
		switch k := rng.IntN(10); {
		case k < 4:
			n := 1 + rng.Int64N(180)
			return fmt.Sprintf("%dT", n), n * minute
		case k < 7:
			n := 1 + rng.Int64N(48)
			return fmt.Sprintf("%dH", n), n * 60 * minute
		case k < 9:
			n := 1 + rng.Int64N(10)
			return fmt.Sprintf("%dD", n), n * day
		case rng.IntN(2) == 0:
			return "W", 7 * day
		default:
			return "M", 31 * day
		}
	}
	const cases = 300
	var nonEmpty atomic.Int64
	t.Cleanup(func() { t.Logf("%d of %d random answers hold data", nonEmpty.Load(), cases) })
	for i := range cases {
		which := "E8"
		if i%4 == 1 {
			which = "E7"
		} else if i%8 == 3 {
			which = "E9"
		}
		vs := subset(3)
		body := map[string]any{"variables": vs}
		maxLen := 260 * day
		p, width := period()
		if which == "E8" {
			maxLen = min(maxLen, 250*width)
			body["period"], body["tz"] = p, tiersZones[rng.IntN(len(tiersZones))]
		}
		start, end := tiersRange(rng, vars[vs[0]], maxLen)
		body["start"], body["end"] = start, end
		name := fmt.Sprintf("%s #%d", which, i)
		if which == "E7" {
			t.Run(fmt.Sprintf("%s %v %d..%d", name, vs, start, end), func(t *testing.T) {
				c := parallelCase(t, c)
				aggs := [][]string{tiersStatAggs, tiersSummaryAggs}[i%8/4]
				got := tiersStatistics(t, c, vars, vs, start, end, aggs)
				ref := refStatistics(t, vars, vs, start, end)
				checkStatistics(t, fmt.Sprintf("%v against the reference SQL", aggs), ref, got, aggs)
				if strings.Contains(mustJSON(t, ref), "count") {
					nonEmpty.Add(1)
				}
			})
			continue
		}
		body["aggregation"] = tiersAggs[rng.IntN(len(tiersAggs))]
		body["join_dataframes"] = rng.IntN(2) == 0
		path := resamplePath
		if which == "E9" {
			path = aggregationPath
		}
		t.Run(fmt.Sprintf("%s %v", name, body), func(t *testing.T) {
			c := parallelCase(t, c)
			asAny := map[string]any{}
			for k, v := range body {
				asAny[k] = v
			}
			anyVars := make([]any, len(vs))
			for i, v := range vs {
				anyVars[i] = v
			}
			asAny["variables"] = anyVars
			got := tiersPost(t, c, path, asAny, vars)
			ref := refAnalytics(t, vars, asAny)
			if err := sameResults(ref, got); err != nil {
				t.Errorf("against the reference SQL: %v\n got %s", err, mustJSON(t, got))
			}
			var labels []int64
			if collectLabels(ref, &labels); len(labels) > 0 {
				nonEmpty.Add(1)
			}
		})
	}
}

// tiersRange is a random range of log-uniform length (1 s to maxLen) that mostly holds
// a point of v, with ends often moved onto (or a millisecond off) a minute, a quarter
// of an hour or a local midnight.
func tiersRange(rng *rand.Rand, v *tiersVar, maxLen int64) (int64, int64) {
	length := int64(math.Exp(rng.Float64()*(math.Log(float64(maxLen))-math.Log(1000)) + math.Log(1000)))
	var start int64
	if len(v.pts) > 0 && rng.IntN(4) != 0 {
		start = v.pts[rng.IntN(len(v.pts))].TS - rng.Int64N(length+1)
	} else {
		lo := int64(1772323200000) // 2026-03-01T00:00Z, the points' span
		start = lo + rng.Int64N(260*86_400_000) - length/2
	}
	edge := func(t int64) int64 {
		switch rng.IntN(8) {
		case 0, 1:
			t -= t % 60_000
		case 2:
			t -= t % 900_000
		case 3:
			loc, err := time.LoadLocation(tiersZones[rng.IntN(len(tiersZones))])
			if err == nil {
				y, m, d := time.UnixMilli(t).In(loc).Date()
				t = time.Date(y, m, d, 0, 0, 0, 0, loc).UnixMilli()
			}
		default:
			return t
		}
		return t + []int64{0, 0, -1, 1}[rng.IntN(4)]
	}
	s, e := edge(start), edge(start+length)
	if e <= s {
		e = max(start+length, s+1)
	}
	return s, e
}

// seedTiers writes the fixture's points through the API (device "tiers", one
// variable per name; a name without points is created empty) and checks they all landed.
func seedTiers(t *testing.T, c *testenv.Client, points map[string][][2]json.Number) map[string]*tiersVar {
	t.Helper()
	names := make([]string, 0, len(points))
	for n := range points {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(points[names[i]]) > len(points[names[j]]) }) // the device first
	vars := map[string]*tiersVar{}
	for _, n := range names {
		v := &tiersVar{}
		for i, p := range points[n] {
			ts, err1 := p[0].Int64()
			val, err2 := p[1].Float64()
			if err1 != nil || err2 != nil {
				t.Fatalf("point %s.%d: %v %v", n, i, err1, err2)
			}
			v.pts = append(v.pts, testenv.Point{TS: ts, Value: val})
		}
		if len(v.pts) == 0 {
			if r := c.Post("/api/v2.0/devices/~tiers/variables/", map[string]any{"label": n}); r.Status != 201 {
				t.Fatalf("create %s: %d %s", n, r.Status, r.Body)
			}
		}
		for from := 0; from < len(v.pts); from += 5000 {
			batch := make([]any, 0, 5000)
			for _, p := range v.pts[from:min(from+5000, len(v.pts))] {
				batch = append(batch, map[string]any{"value": p.Value, "timestamp": p.TS})
			}
			if r := c.Post("/api/v1.6/devices/tiers/"+n+"/values", batch); r.Status != 201 {
				t.Fatalf("post %s: %d %s", n, r.Status, r.Body)
			}
		}
		v.id = c.VariableID("tiers", n)
		var count int
		err := env.DB.Pool.QueryRow(context.Background(), `SELECT v.id, count(x.ts) FROM variables v
			LEFT JOIN "values" x ON x.variable_id = v.id WHERE v.public_id = $1 GROUP BY v.id`, v.id).Scan(&v.key, &count)
		if err != nil || count != len(v.pts) {
			t.Fatalf("seed %s: %d values stored of %d (%v)", n, count, len(v.pts), err)
		}
		vars[n] = v
	}
	return vars
}

func caseVars(body map[string]any) []string {
	var out []string
	for _, n := range body["variables"].([]any) {
		out = append(out, n.(string))
	}
	return out
}

func caseMs(t *testing.T, body map[string]any, key string) int64 {
	t.Helper()
	switch v := body[key].(type) {
	case float64:
		return int64(v)
	case int64:
		return v
	}
	t.Fatalf("%s: %v", key, body[key])
	return 0
}

// asNumbers turns v into what decodeNumbers gives for its JSON.
func asNumbers(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeNumbers(t, b)
}

// tiersStatistics asks E7 for aggs of names over [start, end] and returns each entry's
// results, in request order.
func tiersStatistics(t *testing.T, c *testenv.Client, vars map[string]*tiersVar, names []string, start, end int64, aggs []string) []any {
	t.Helper()
	refs := make([]any, len(names))
	for i, n := range names {
		refs[i] = map[string]any{"variable": vars[n].id}
	}
	r := c.Post(statsPath, map[string]any{"start": start, "end": end, "variables": refs, "aggregations": aggs})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	ans, _ := decodeNumbers(t, r.Body).(map[string]any)
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

// tiersPost sends an E8 or E9 body (variable names) and returns its results; it checks
// the columns too.
func tiersPost(t *testing.T, c *testenv.Client, path string, body map[string]any, vars map[string]*tiersVar) any {
	t.Helper()
	sent := map[string]any{}
	for k, v := range body {
		sent[k] = v
	}
	var ids []string
	for _, n := range caseVars(body) {
		ids = append(ids, vars[n].id)
	}
	sent["variables"] = ids
	r := c.Post(path, sent)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var got struct {
		Results json.RawMessage `json:"results"`
		Columns any             `json:"columns"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	_, period := body["period"]
	if cols := columnsFor(ids, body["join_dataframes"] == true, period); fmt.Sprint(got.Columns) != fmt.Sprint(cols) {
		t.Errorf("columns %v, want %v", got.Columns, cols)
	}
	return decodeNumbers(t, got.Results)
}

// sameStatistics compares E7 results (one object per variable) on aggs, which got must
// hold exactly (none when want is empty): timestamps equal, values within 1e-9
// relative, nulls alike.
// std alone may be off by stdTol relative (see checkStatistics).
func sameStatistics(want, got any, aggs []string, stdTol float64) error {
	w, okW := want.([]any)
	g, okG := got.([]any)
	if !okW || !okG || len(w) != len(g) {
		return fmt.Errorf("%d entries, want %d", len(g), len(w))
	}
	for i := range w {
		wm, okW := w[i].(map[string]any)
		gm, okG := g[i].(map[string]any)
		if !okW || !okG || (len(wm) == 0) != (len(gm) == 0) || (len(wm) > 0 && len(gm) != len(aggs)) {
			return fmt.Errorf("[%d]: aggregations %v, want %v of %v", i, keys(gm), aggs, keys(wm))
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
			if err := sameScalar(wa["value"], ga["value"], false); err != nil && (agg != "std" || !within(wa["value"], ga["value"], stdTol)) {
				return fmt.Errorf("[%d].%s: %w", i, agg, err)
			}
			if ts, ok := wa["timestamp"]; ok {
				if err := sameScalar(ts, ga["timestamp"], true); err != nil {
					return fmt.Errorf("[%d].%s: %w", i, agg, err)
				}
			}
		}
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

// checkStatistics fails t unless got equals want (sameStatistics, 1e-9 relative: std
// too, with or without percentiles, for values like 1e6 ± 0.01).
func checkStatistics(t *testing.T, what string, want, got any, aggs []string) {
	t.Helper()
	if err := sameStatistics(want, got, aggs, 1e-9); err != nil {
		t.Errorf("%s: %v\n got %s", what, err, mustJSON(t, got))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The reference SQL. Timestamps are compared in epoch milliseconds.
const refMs = `(extract(epoch FROM %s) * 1000)::bigint`

func refTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// refValues is what the reference SQL reads (keys: its variables as an array; $2 and
// $3 its range): the rows of "values", and in the packed run of TestTiersProperty both
// layouts (packedRefValues).
var refValues = func(_ string) string { return `"values"` }

// packedRefValues are both layouts of the raw values: their decoding (packed_values) is
// checked bit for bit by pkg/values' tests, and the answers against pandas here.
func packedRefValues(keys string) string {
	return `(SELECT variable_id, ts, value FROM "values"
	UNION ALL SELECT variable_id, ts, value FROM packed_values(` + keys + `, $2, $3))`
}

// refStatistics is E7 straight from "values", one statement per variable: the plain
// aggregates, percentile_cont, first/last by time, the earliest timestamp holding the
// min and the max, and the sample standard deviation in two passes (the mean first,
// then the squared deviations from it: exact to the last digits for 1e6 ± 0.01).
func refStatistics(t *testing.T, vars map[string]*tiersVar, names []string, start, end int64) any {
	t.Helper()
	q := fmt.Sprintf(`WITH x AS (
		SELECT ts, value FROM `+refValues("ARRAY[$1::bigint]")+` WHERE variable_id = $1 AND ts BETWEEN $2 AND $3
	), s AS (
		SELECT count(*) AS n, sum(value) AS sum, avg(value) AS mean, min(value) AS min, max(value) AS max,
		       percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY value) AS p,
		       first(value, ts) AS first, last(value, ts) AS last, min(ts) AS first_ts, max(ts) AS last_ts
		FROM x
	)
	SELECT s.n, s.sum, s.mean, s.min, s.max, s.p[1], s.p[2], s.p[3], s.first, s.last, %s, %s,
	       (SELECT %s FROM x WHERE x.value = s.min), (SELECT %s FROM x WHERE x.value = s.max),
	       CASE WHEN s.n > 1 THEN (SELECT sqrt(sum((x.value - s.mean) * (x.value - s.mean)) / (s.n - 1)) FROM x) END
	FROM s`, fmt.Sprintf(refMs, "s.first_ts"), fmt.Sprintf(refMs, "s.last_ts"),
		fmt.Sprintf(refMs, "min(x.ts)"), fmt.Sprintf(refMs, "min(x.ts)"))
	out := make([]any, len(names))
	for i, n := range names {
		var count int64
		var sum, mean, mn, mx, p25, p50, p75, first, last, std *float64
		var firstTS, lastTS, minTS, maxTS *int64
		err := env.DB.Pool.QueryRow(context.Background(), q, vars[n].key, refTime(start), refTime(end)).Scan(
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
	return asNumbers(t, out)
}

// refBuckets says how the reference buckets a period (API.md §8, pandas 1.5):
//   - minutes and hours: fixed widths of absolute time, counted from the instant of
//     local midnight of the day of the earliest value (time_bucket on timestamptz with
//     that origin);
//   - nD: n local calendar days from that local midnight (time_bucket on the local
//     wall-clock time, a timestamp without zone);
//   - W: local Monday to Sunday, keyed by its Sunday; M: the local month, keyed by its
//     first day and labelled with its last.
//
// Local midnight is read with a plain AT TIME ZONE: right for the six zones here, whose
// midnights all exist and happen once (not for America/Santiago or Atlantic/Azores).
//
// key is the bucket of x.ts (o.day is the local midnight, a timestamp without zone),
// step the distance between keys for generate_series, label the instant of key k.
type refBuckets struct{ key, step, label string }

func refBucketsFor(t *testing.T, period string) refBuckets {
	t.Helper()
	unit, digits := period[len(period)-1:], period[:len(period)-1]
	n := 1
	if digits != "" {
		if _, err := fmt.Sscanf(digits, "%d", &n); err != nil {
			t.Fatalf("period %q", period)
		}
	}
	switch unit {
	case "T", "H":
		width := fmt.Sprintf("'%d %s'::interval", n, map[string]string{"T": "minutes", "H": "hours"}[unit])
		return refBuckets{key: "time_bucket(" + width + ", x.ts, o.day AT TIME ZONE $4)", step: width, label: "%s"}
	case "D":
		width := fmt.Sprintf("'%d days'::interval", n)
		return refBuckets{key: "time_bucket(" + width + ", x.ts AT TIME ZONE $4, o.day)", step: width, label: "%s AT TIME ZONE $4"}
	case "W":
		return refBuckets{key: "date_trunc('week', x.ts AT TIME ZONE $4) + interval '6 days'", step: "interval '7 days'", label: "%s AT TIME ZONE $4"}
	case "M":
		return refBuckets{key: "date_trunc('month', x.ts AT TIME ZONE $4)", step: "interval '1 month'",
			label: "(%s + interval '1 month' - interval '1 day') AT TIME ZONE $4"}
	}
	t.Fatalf("period %q", period)
	return refBuckets{}
}

// refAnalytics answers an E8 (with "period") or E9 body (variable names) from "values".
func refAnalytics(t *testing.T, vars map[string]*tiersVar, body map[string]any) any {
	t.Helper()
	names := caseVars(body)
	keys := make([]int64, len(names))
	for i, n := range names {
		keys[i] = vars[n].key
	}
	start, end := refTime(caseMs(t, body, "start")), refTime(caseMs(t, body, "end"))
	agg := body["aggregation"].(string)
	join := body["join_dataframes"] == true
	fn := map[string]string{"mean": "avg", "min": "min", "max": "max", "count": "count", "sum": "sum"}[agg]
	if fn == "" {
		t.Fatalf("aggregation %q", agg)
	}
	if p, ok := body["period"].(string); ok {
		return refResample(t, keys, start, end, p, body["tz"].(string), fn, join)
	}
	return refAggregation(t, keys, start, end, fn, join)
}

func refResample(t *testing.T, keys []int64, start, end time.Time, period, tz, fn string, join bool) any {
	t.Helper()
	b := refBucketsFor(t, period)
	empty := "g.v" // an empty bucket inside a series: null, or 0 for count and sum
	if fn == "count" || fn == "sum" {
		empty = "coalesce(g.v, 0)"
	}
	q := fmt.Sprintf(`WITH x AS (
		SELECT variable_id, ts, value FROM `+refValues("$1::bigint[]")+` WHERE variable_id = ANY($1) AND ts BETWEEN $2 AND $3
	), o AS (
		SELECT date_trunc('day', min(ts) AT TIME ZONE $4) AS day FROM x
	), g AS (
		SELECT x.variable_id, %[1]s AS k, %[2]s(x.value)::float8 AS v FROM x, o GROUP BY 1, 2
	), r AS (
		SELECT variable_id, min(k) AS lo, max(k) AS hi FROM g GROUP BY 1
	)
	SELECT r.variable_id, %[3]s, %[4]s
	FROM r CROSS JOIN LATERAL generate_series(r.lo, r.hi, %[5]s) AS grid(k)
	LEFT JOIN g ON g.variable_id = r.variable_id AND g.k = grid.k
	ORDER BY 1, 2 DESC`, b.key, fn, fmt.Sprintf(refMs, fmt.Sprintf(b.label, "grid.k")), empty, b.step)
	rows, err := env.DB.Pool.Query(context.Background(), q, keys, start, end, tz)
	if err != nil {
		t.Fatalf("reference resample: %v\n%s", err, q)
	}
	defer rows.Close()
	type row struct {
		ts int64
		v  *float64
	}
	series := map[int64][]row{}
	for rows.Next() {
		var key int64
		var r row
		if err := rows.Scan(&key, &r.ts, &r.v); err != nil {
			t.Fatal(err)
		}
		series[key] = append(series[key], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reference resample: %v\n%s", err, q)
	}
	if !join {
		out := make([]any, len(keys))
		for i, k := range keys {
			pairs := []any{}
			for _, r := range series[k] {
				pairs = append(pairs, []any{r.ts, r.v})
			}
			out[i] = pairs
		}
		return asNumbers(t, out)
	}
	// the outer join on labels: one row per label of any variable, newest first
	cells := map[int64][]*float64{}
	for i, k := range keys {
		for _, r := range series[k] {
			if cells[r.ts] == nil {
				cells[r.ts] = make([]*float64, len(keys))
			}
			cells[r.ts][i] = r.v
		}
	}
	labels := make([]int64, 0, len(cells))
	for ts := range cells {
		labels = append(labels, ts)
	}
	sort.Slice(labels, func(i, j int) bool { return labels[i] > labels[j] })
	out := []any{}
	for _, ts := range labels {
		row := []any{ts}
		for _, v := range cells[ts] {
			row = append(row, v)
		}
		out = append(out, row)
	}
	return asNumbers(t, out)
}

// refAggregation is E9: per variable (or over all of them together when joined) the
// aggregate, at the earliest timestamp holding it for min and max, else at the latest.
func refAggregation(t *testing.T, keys []int64, start, end time.Time, fn string, join bool) any {
	t.Helper()
	at := fmt.Sprintf(refMs, "max(x.ts)")
	if fn == "min" || fn == "max" {
		at = fmt.Sprintf(`(SELECT %s FROM x y WHERE y.value = %s(x.value) AND y.grp = x.grp)`, fmt.Sprintf(refMs, "min(y.ts)"), fn)
	}
	grp := "variable_id"
	if join {
		grp = "0::bigint"
	}
	q := fmt.Sprintf(`WITH x AS (
		SELECT %s AS grp, ts, value FROM `+refValues("$1::bigint[]")+` WHERE variable_id = ANY($1) AND ts BETWEEN $2 AND $3
	)
	SELECT x.grp, %s, %s(x.value)::float8 FROM x GROUP BY x.grp`, grp, at, fn)
	rows, err := env.DB.Pool.Query(context.Background(), q, keys, start, end)
	if err != nil {
		t.Fatalf("reference aggregation: %v\n%s", err, q)
	}
	defer rows.Close()
	got := map[int64][]any{}
	for rows.Next() {
		var grp, ts int64
		var v float64
		if err := rows.Scan(&grp, &ts, &v); err != nil {
			t.Fatal(err)
		}
		got[grp] = []any{ts, v}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reference aggregation: %v\n%s", err, q)
	}
	if join {
		if p, ok := got[0]; ok {
			return asNumbers(t, []any{p})
		}
		return asNumbers(t, []any{})
	}
	out := make([]any, len(keys))
	for i, k := range keys {
		if p, ok := got[k]; ok {
			out[i] = []any{p}
		} else {
			out[i] = []any{}
		}
	}
	return asNumbers(t, out)
}
