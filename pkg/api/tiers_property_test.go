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
//   - the answer of the hand-written SQL below (E8, E9) and in testenv's oracle.go (E7,
//     RefStatistics), run directly on the raw "values" table: time_bucket and AT TIME
//     ZONE, avg, a two-pass standard deviation, percentile_cont, first/last. It knows
//     nothing of querybuilder/ or of any rollup table.
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

// tiersZones are the zones of the random loop (the fixtures' zones).
var tiersZones = []string{"UTC", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe", "America/St_Johns", "Europe/Berlin"}

var tiersStatAggs = []string{"first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"}

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
		vars["a"].Key).Scan(&left); err != nil || left != 0 {
		t.Fatalf("packing: %d rows of a left (%v)", left, err)
	}
	rowsRef := testenv.RefValues
	testenv.RefValues = testenv.PackedRefValues
	defer func() { testenv.RefValues = rowsRef }()
	t.Run("packed", func(t *testing.T) { tiersCases(t, c, vars, fx, differ) })
}

// tiersCases compares the answers to every fixture case and the random requests with
// pandas and the reference SQL.
func tiersCases(t *testing.T, c *testenv.Client, vars map[string]*testenv.Var, fx tiersFixture, differ map[string]*tzDisagreement) {
	t.Run("statistics", func(t *testing.T) {
		for _, pc := range fx.Statistics {
			t.Run(pc.Name, func(t *testing.T) {
				c := parallelCase(t, c)
				names := caseVars(pc.Body)
				start, end := caseMs(t, pc.Body, "start"), caseMs(t, pc.Body, "end")
				want, ref := testenv.DecodeNumbers(t, pc.Expected), env.RefStatistics(t, vars, names, start, end)
				if err := testenv.SameStatistics(want, ref, tiersStatAggs, 1e-9); err != nil {
					t.Fatalf("the reference SQL disagrees with pandas (a bug of this test): %v", err)
				}
				// with and without percentiles: the plans differ (raw rows or summaries)
				for _, aggs := range [][]string{tiersStatAggs, testenv.SummaryAggs} {
					got := testenv.PostStatistics(t, c, vars, names, start, end, aggs)
					testenv.CheckStatistics(t, fmt.Sprintf("%v against pandas", aggs), want, got, aggs)
					testenv.CheckStatistics(t, fmt.Sprintf("%v against the reference SQL", aggs), ref, got, aggs)
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
					} else if err := sameResults(testenv.DecodeNumbers(t, pc.Expected), got); err != nil {
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
func tiersRandom(t *testing.T, c *testenv.Client, vars map[string]*testenv.Var) {
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
				aggs := [][]string{tiersStatAggs, testenv.SummaryAggs}[i%8/4]
				got := testenv.PostStatistics(t, c, vars, vs, start, end, aggs)
				ref := env.RefStatistics(t, vars, vs, start, end)
				testenv.CheckStatistics(t, fmt.Sprintf("%v against the reference SQL", aggs), ref, got, aggs)
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
func tiersRange(rng *rand.Rand, v *testenv.Var, maxLen int64) (int64, int64) {
	length := int64(math.Exp(rng.Float64()*(math.Log(float64(maxLen))-math.Log(1000)) + math.Log(1000)))
	var start int64
	if len(v.Pts) > 0 && rng.IntN(4) != 0 {
		start = v.Pts[rng.IntN(len(v.Pts))].TS - rng.Int64N(length+1)
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
func seedTiers(t *testing.T, c *testenv.Client, points map[string][][2]json.Number) map[string]*testenv.Var {
	t.Helper()
	names := make([]string, 0, len(points))
	for n := range points {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(points[names[i]]) > len(points[names[j]]) }) // the device first
	vars := map[string]*testenv.Var{}
	for _, n := range names {
		v := &testenv.Var{}
		for i, p := range points[n] {
			ts, err1 := p[0].Int64()
			val, err2 := p[1].Float64()
			if err1 != nil || err2 != nil {
				t.Fatalf("point %s.%d: %v %v", n, i, err1, err2)
			}
			v.Pts = append(v.Pts, testenv.Point{TS: ts, Value: val})
		}
		if len(v.Pts) == 0 {
			if r := c.Post("/api/v2.0/devices/~tiers/variables/", map[string]any{"label": n}); r.Status != 201 {
				t.Fatalf("create %s: %d %s", n, r.Status, r.Body)
			}
		}
		for from := 0; from < len(v.Pts); from += 5000 {
			batch := make([]any, 0, 5000)
			for _, p := range v.Pts[from:min(from+5000, len(v.Pts))] {
				batch = append(batch, map[string]any{"value": p.Value, "timestamp": p.TS})
			}
			if r := c.Post("/api/v1.6/devices/tiers/"+n+"/values", batch); r.Status != 201 {
				t.Fatalf("post %s: %d %s", n, r.Status, r.Body)
			}
		}
		v.ID = c.VariableID("tiers", n)
		var count int
		err := env.DB.Pool.QueryRow(context.Background(), `SELECT v.id, count(x.ts) FROM variables v
			LEFT JOIN "values" x ON x.variable_id = v.id WHERE v.public_id = $1 GROUP BY v.id`, v.ID).Scan(&v.Key, &count)
		if err != nil || count != len(v.Pts) {
			t.Fatalf("seed %s: %d values stored of %d (%v)", n, count, len(v.Pts), err)
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

// tiersPost sends an E8 or E9 body (variable names) and returns its results; it checks
// the columns too.
func tiersPost(t *testing.T, c *testenv.Client, path string, body map[string]any, vars map[string]*testenv.Var) any {
	t.Helper()
	sent := map[string]any{}
	for k, v := range body {
		sent[k] = v
	}
	var ids []string
	for _, n := range caseVars(body) {
		ids = append(ids, vars[n].ID)
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
	return testenv.DecodeNumbers(t, got.Results)
}

// The reference SQL of E8 and E9 (E7's is testenv.RefStatistics): it reads
// testenv.RefValues and compares timestamps in epoch milliseconds (testenv.RefMs).

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
func refAnalytics(t *testing.T, vars map[string]*testenv.Var, body map[string]any) any {
	t.Helper()
	names := caseVars(body)
	keys := make([]int64, len(names))
	for i, n := range names {
		keys[i] = vars[n].Key
	}
	start, end := testenv.RefTime(caseMs(t, body, "start")), testenv.RefTime(caseMs(t, body, "end"))
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
		SELECT variable_id, ts, value FROM `+testenv.RefValues("$1::bigint[]")+` WHERE variable_id = ANY($1) AND ts BETWEEN $2 AND $3
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
	ORDER BY 1, 2 DESC`, b.key, fn, fmt.Sprintf(testenv.RefMs, fmt.Sprintf(b.label, "grid.k")), empty, b.step)
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
		return testenv.AsNumbers(t, out)
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
	return testenv.AsNumbers(t, out)
}

// refAggregation is E9: per variable (or over all of them together when joined) the
// aggregate, at the earliest timestamp holding it for min and max, else at the latest.
func refAggregation(t *testing.T, keys []int64, start, end time.Time, fn string, join bool) any {
	t.Helper()
	at := fmt.Sprintf(testenv.RefMs, "max(x.ts)")
	if fn == "min" || fn == "max" {
		at = fmt.Sprintf(`(SELECT %s FROM x y WHERE y.value = %s(x.value) AND y.grp = x.grp)`, fmt.Sprintf(testenv.RefMs, "min(y.ts)"), fn)
	}
	grp := "variable_id"
	if join {
		grp = "0::bigint"
	}
	q := fmt.Sprintf(`WITH x AS (
		SELECT %s AS grp, ts, value FROM `+testenv.RefValues("$1::bigint[]")+` WHERE variable_id = ANY($1) AND ts BETWEEN $2 AND $3
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
			return testenv.AsNumbers(t, []any{p})
		}
		return testenv.AsNumbers(t, []any{})
	}
	out := make([]any, len(keys))
	for i, k := range keys {
		if p, ok := got[k]; ok {
			out[i] = []any{p}
		} else {
			out[i] = []any{}
		}
	}
	return testenv.AsNumbers(t, out)
}
