package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const statsPath = "/api/v2.0/data/statistics/"

// t0 is an arbitrary origin of the seeded series (2026-11-01T00:00:00Z).
const t0 = int64(1793491200000)

// irregularSeries is a reproducible series with uneven gaps, many repeated values and
// its minimum and maximum each reached at several timestamps.
func irregularSeries(seed uint64, n int) []testenv.Point {
	rng := rand.New(rand.NewPCG(seed, 7))
	pts := make([]testenv.Point, n)
	ts := t0
	for i := range pts {
		ts += 1 + rng.Int64N(90_000)
		pts[i] = testenv.Point{TS: ts, Value: float64(rng.IntN(21)-10) / 4}
	}
	// the extremes, each at least three times, one of them before every other copy
	for _, i := range []int{3, n / 3, n / 2, n - 4} {
		pts[i].Value = -7.25
		pts[i+1].Value = 9.5
	}
	return pts
}

// reference computes the expected statistics of the points in [start, end] the plain
// way: sort by time, scan, and numpy's linear percentiles on the sorted values.
type reference struct {
	n                             int
	first, last, min, max         testenv.Point
	sum, mean, std, p25, p50, p75 float64
	stdNull                       bool
}

func referenceStats(pts []testenv.Point, start, end int64) reference {
	var in []testenv.Point
	for _, p := range pts {
		if p.TS >= start && p.TS <= end {
			in = append(in, p)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].TS < in[j].TS })
	r := reference{n: len(in)}
	if r.n == 0 {
		return r
	}
	r.first, r.last, r.min, r.max = in[0], in[len(in)-1], in[0], in[0]
	for _, p := range in {
		if p.Value < r.min.Value { // strict: the earliest holder of a tie stays
			r.min = p
		}
		if p.Value > r.max.Value {
			r.max = p
		}
		r.sum += p.Value
	}
	r.mean = r.sum / float64(r.n)
	if r.n < 2 {
		r.stdNull = true
	} else {
		var ss float64
		for _, p := range in {
			ss += (p.Value - r.mean) * (p.Value - r.mean)
		}
		r.std = math.Sqrt(ss / float64(r.n-1))
	}
	vals := make([]float64, len(in))
	for i, p := range in {
		vals[i] = p.Value
	}
	sort.Float64s(vals)
	r.p25, r.p50, r.p75 = linearPercentile(vals, 0.25), linearPercentile(vals, 0.5), linearPercentile(vals, 0.75)
	return r
}

// linearPercentile is numpy's default (method "linear") on sorted values.
func linearPercentile(sorted []float64, q float64) float64 {
	h := float64(len(sorted)-1) * q
	lo := math.Floor(h)
	if int(lo)+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[int(lo)] + (h-lo)*(sorted[int(lo)+1]-sorted[int(lo)])
}

func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }

type statsBody = map[string]any

func postStats(t *testing.T, c *testenv.Client, body any) map[string]any {
	t.Helper()
	r := c.Post(statsPath, body)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return r.Object(t)
}

func entry(t *testing.T, ans map[string]any, i int) map[string]any {
	t.Helper()
	results, ok := ans["results"].([]any)
	if !ok || i >= len(results) {
		t.Fatalf("no results[%d] in %v", i, ans)
	}
	return results[i].(map[string]any)
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// checkAgg compares one aggregation object with the expected value (and timestamp
// when wantTS is not nil).
func checkAgg(t *testing.T, results map[string]any, name string, want float64, wantTS *int64) {
	t.Helper()
	obj, ok := results[name].(map[string]any)
	if !ok {
		t.Errorf("%s missing in %v", name, results)
		return
	}
	if got, ok := obj["value"].(float64); !ok || !closeTo(got, want) {
		t.Errorf("%s value %v, want %v", name, obj["value"], want)
	}
	ts, hasTS := obj["timestamp"]
	switch {
	case wantTS == nil && hasTS:
		t.Errorf("%s has a timestamp %v", name, ts)
	case wantTS != nil && ts != float64(*wantTS):
		t.Errorf("%s timestamp %v, want %d", name, ts, *wantTS)
	}
}

func checkAll(t *testing.T, results map[string]any, ref reference) {
	t.Helper()
	checkAgg(t, results, "first", ref.first.Value, &ref.first.TS)
	checkAgg(t, results, "last", ref.last.Value, &ref.last.TS)
	checkAgg(t, results, "min", ref.min.Value, &ref.min.TS)
	checkAgg(t, results, "max", ref.max.Value, &ref.max.TS)
	checkAgg(t, results, "count", float64(ref.n), nil)
	checkAgg(t, results, "sum", ref.sum, nil)
	checkAgg(t, results, "mean", ref.mean, nil)
	checkAgg(t, results, "p25", ref.p25, nil)
	checkAgg(t, results, "p50", ref.p50, nil)
	checkAgg(t, results, "p75", ref.p75, nil)
	if ref.stdNull {
		if v := results["std"].(map[string]any); v["value"] != nil || len(v) != 1 {
			t.Errorf("std %v, want {\"value\": null}", v)
		}
	} else {
		checkAgg(t, results, "std", ref.std, nil)
	}
	if len(results) != 11 {
		t.Errorf("%d aggregations, want 11: %v", len(results), results)
	}
}

func TestStatisticsAggregations(t *testing.T) {
	c := env.Client(t)
	dev := unique("stats-dev")
	pa := irregularSeries(1, 400)
	pb := irregularSeries(2, 57)
	a := env.Seed(t, env.AdminToken, dev, "a", pa)
	b := env.Seed(t, env.AdminToken, dev, "b", pb)
	// bounds on exact sample times: both ends are inclusive
	start, end := pa[40].TS, pa[350].TS
	ans := postStats(t, c, statsBody{"start": start, "end": end, "variables": []any{
		statsBody{"variable": a.VariableID},
		statsBody{"variable": "~b", "device": "~" + dev},
	}})
	if ans["start"] != float64(start) || ans["end"] != float64(end) {
		t.Errorf("start/end echoed as %v/%v", ans["start"], ans["end"])
	}
	for i, pts := range [][]testenv.Point{pa, pb} {
		e := entry(t, ans, i)
		if e["code"] != float64(200) {
			t.Fatalf("entry %d: %v", i, e)
		}
		ref := referenceStats(pts, start, end)
		if ref.n < 2 {
			t.Fatalf("entry %d: range holds %d points; the fixture should hold more", i, ref.n)
		}
		checkAll(t, e["results"].(map[string]any), ref)
	}
	if b.VariableID == a.VariableID {
		t.Fatal("seed returned one variable twice")
	}
}

// TestStatisticsFirstLast covers the probe-only statement that first/last alone compile to.
func TestStatisticsFirstLast(t *testing.T) {
	c := env.Client(t)
	pts := irregularSeries(5, 300)
	s := env.Seed(t, env.AdminToken, unique("stats-ends"), "v", pts)
	one := []any{statsBody{"variable": s.VariableID}, statsBody{"variable": "0123456789abcdef01234567"}}
	for _, rng := range [][2]int64{{pts[17].TS, pts[250].TS}, {pts[17].TS + 1, pts[250].TS - 1}, {0, t0 + 1e10}} {
		ans := postStats(t, c, statsBody{"start": rng[0], "end": rng[1], "variables": one, "aggregations": []string{"last", "first"}})
		got := entry(t, ans, 0)["results"].(map[string]any)
		ref := referenceStats(pts, rng[0], rng[1])
		checkAgg(t, got, "first", ref.first.Value, &ref.first.TS)
		checkAgg(t, got, "last", ref.last.Value, &ref.last.TS)
		if len(got) != 2 || entry(t, ans, 1)["code"] != float64(404) {
			t.Errorf("answer %v", ans)
		}
	}
	r := c.Post(statsPath, statsBody{"start": pts[3].TS + 1, "end": pts[4].TS - 1, "variables": one[:1], "aggregations": []string{"first"}})
	if !strings.Contains(string(r.Body), `"results":{},"code":200`) {
		t.Errorf("empty range: %s", r.Body)
	}
}

func TestStatisticsTiesTakeTheEarliestTimestamp(t *testing.T) {
	dev := unique("stats-ties")
	pts := []testenv.Point{{TS: t0 + 50, Value: 3}, {TS: t0 + 10, Value: 1}, {TS: t0 + 30, Value: 1},
		{TS: t0 + 20, Value: 3}, {TS: t0 + 40, Value: 2}, {TS: t0 + 5, Value: 2}}
	s := env.Seed(t, env.AdminToken, dev, "ties", pts)
	ans := postStats(t, env.Client(t), statsBody{"start": t0, "end": t0 + 100,
		"aggregations": []string{"min", "max"}, "variables": []any{statsBody{"variable": s.VariableID}}})
	got := entry(t, ans, 0)["results"].(map[string]any)
	checkAgg(t, got, "min", 1, ptr(t0+10))
	checkAgg(t, got, "max", 3, ptr(t0+20))
	if len(got) != 2 {
		t.Errorf("unrequested aggregations answered: %v", got)
	}
}

func ptr[T any](v T) *T { return &v }

func TestStatisticsRanges(t *testing.T) {
	c := env.Client(t)
	pts := irregularSeries(3, 30)
	s := env.Seed(t, env.AdminToken, unique("stats-ranges"), "v", pts)
	one := statsBody{"variable": s.VariableID}

	t.Run("single point", func(t *testing.T) {
		p := pts[10]
		ans := postStats(t, c, statsBody{"start": p.TS, "end": p.TS, "variables": []any{one}})
		checkAll(t, entry(t, ans, 0)["results"].(map[string]any), referenceStats(pts, p.TS, p.TS))
	})
	// without std and percentiles the statement reads minute rollups (docs/queries.md)
	summarized := []string{"first", "last", "min", "max", "count", "sum", "mean"}
	t.Run("single point from rollups", func(t *testing.T) {
		p := pts[10]
		ans := postStats(t, c, statsBody{"start": p.TS / 60_000 * 60_000, "end": p.TS/60_000*60_000 + 59_999,
			"variables": []any{one}, "aggregations": summarized})
		ref := referenceStats(pts, p.TS/60_000*60_000, p.TS/60_000*60_000+59_999)
		if ref.n != 1 {
			t.Fatalf("the minute of point 10 holds %d points; the fixture should hold one", ref.n)
		}
		got := entry(t, ans, 0)["results"].(map[string]any)
		for _, a := range []struct {
			name string
			p    testenv.Point
		}{{"first", ref.first}, {"last", ref.last}, {"min", ref.min}, {"max", ref.max}} {
			checkAgg(t, got, a.name, a.p.Value, &a.p.TS)
		}
		checkAgg(t, got, "count", 1, nil)
		checkAgg(t, got, "sum", p.Value, nil)
		checkAgg(t, got, "mean", p.Value, nil)
	})
	for _, aggs := range [][]string{nil, summarized} {
		t.Run(fmt.Sprintf("empty range %v", aggs), func(t *testing.T) {
			body := statsBody{"start": pts[10].TS + 1, "end": pts[11].TS - 1, "variables": []any{one}}
			if aggs != nil {
				body["aggregations"] = aggs
			}
			r := c.Post(statsPath, body)
			if r.Status != 200 || !strings.Contains(string(r.Body), `"results":{},"code":200`) {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
	}
	t.Run("before all data", func(t *testing.T) {
		ans := postStats(t, c, statsBody{"start": 0, "end": t0, "variables": []any{one}})
		if got := entry(t, ans, 0)["results"]; len(got.(map[string]any)) != 0 {
			t.Fatalf("results %v, want {}", got)
		}
	})
	t.Run("count is an integer", func(t *testing.T) {
		r := c.Post(statsPath, statsBody{"start": pts[0].TS, "end": pts[2].TS, "decimalPlaces": 2,
			"aggregations": []string{"count"}, "variables": []any{one}})
		if !strings.Contains(string(r.Body), `"results":{"count":{"value":3}}`) {
			t.Fatalf("%s", r.Body)
		}
	})
}

// TestStatisticsEntries mixes found, unknown and other-account references: every entry
// answers on its own, in request order.
func TestStatisticsEntries(t *testing.T) {
	c := env.Client(t)
	dev := unique("stats-mixed")
	mine := env.Seed(t, env.AdminToken, dev, "temp", []testenv.Point{{TS: t0, Value: 1}})
	other := env.NewAccount(t)
	theirs := env.Seed(t, other, dev, "temp", []testenv.Point{{TS: t0, Value: 2}})
	vars := []any{
		statsBody{"variable": mine.VariableID},
		statsBody{"variable": theirs.VariableID},                             // other account, by id
		statsBody{"variable": "~TEMP", "device": "~" + strings.ToUpper(dev)}, // labels are case-insensitive
		statsBody{"variable": "~temp", "device": mine.DeviceID},
		statsBody{"variable": "~temp", "device": theirs.DeviceID}, // other account's device
		statsBody{"variable": "0123456789abcdef01234567"},         // unknown id
		statsBody{"variable": "not an id"},                        // can match nothing
		statsBody{"variable": "~nope", "device": "~" + dev},
		statsBody{"variable": mine.VariableID, "device": "~elsewhere"}, // id on another device
		statsBody{"variable": mine.VariableID, "device": "~" + dev},
	}
	// p50 too: the percentiles resolve the references again, in parts (four here, with
	// the same variable in each), and must still give one answer per entry
	ans := postStats(t, c, statsBody{"start": t0, "end": t0, "variables": vars, "aggregations": []string{"sum", "p50"}})
	results := ans["results"].([]any)
	if len(results) != len(vars) {
		t.Fatalf("%d entries for %d variables", len(results), len(vars))
	}
	found := map[int]bool{0: true, 2: true, 3: true, 9: true}
	wantDevice, wantVariable := summaries(t, c.URL, mine)
	for i, v := range vars {
		e := results[i].(map[string]any)
		raw, _ := json.Marshal(e)
		if !found[i] {
			want := fmt.Sprintf(`{"code":404,"message":"Variable not found.","variable":{"id":%q}}`, v.(statsBody)["variable"])
			if string(raw) != want {
				t.Errorf("entry %d: %s, want %s", i, raw, want)
			}
			continue
		}
		res := e["results"].(map[string]any)
		if e["code"] != float64(200) || res["sum"].(map[string]any)["value"] != float64(1) ||
			res["p50"].(map[string]any)["value"] != float64(1) {
			t.Errorf("entry %d: %s", i, raw)
		}
		d, _ := json.Marshal(e["device"])
		vv, _ := json.Marshal(e["variable"])
		if string(d) != wantDevice || string(vv) != wantVariable {
			t.Errorf("entry %d summaries\n got %s %s\nwant %s %s", i, d, vv, wantDevice, wantVariable)
		}
	}
}

// summaries reads the seeded device and variable straight from the tables and renders
// the summaries E7 must answer (keys sorted, as json.Marshal of a map writes them).
func summaries(t *testing.T, base string, s testenv.Seeded) (device, variable string) {
	t.Helper()
	ctx := context.Background()
	render := func(kind, id, table string) string {
		var label, name string
		var created time.Time
		err := env.DB.NewRaw("SELECT label, name, created_at FROM "+table+" WHERE public_id = ?", id).
			Scan(ctx, &label, &name, &created)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]string{"url": base + "/api/v2.0/" + kind + "/" + id, "id": id,
			"label": label, "name": name, "createdAt": model.Timestamp(created)})
		return string(b)
	}
	return render("devices", s.DeviceID, "devices"), render("variables", s.VariableID, "variables")
}

func TestStatisticsDecimalPlaces(t *testing.T) {
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	dev := unique("stats-round")
	vars := []any{}
	// values whose rounding is decided by the half: 2.675 reads as 2.675 to a client
	// although its binary value lies just below it
	for i, v := range []float64{2.675, -2.675, 1.5, -0.5, 0.125, 7} {
		s := env.Seed(t, tok, dev, fmt.Sprintf("v%d", i), []testenv.Point{{TS: t0, Value: v}})
		vars = append(vars, statsBody{"variable": s.VariableID})
	}
	firsts := func(body statsBody) []any {
		body["start"], body["end"], body["variables"], body["aggregations"] = t0, t0, vars, []string{"first", "count"}
		ans := postStats(t, c, body)
		out := []any{}
		for i := range vars {
			out = append(out, entry(t, ans, i)["results"].(map[string]any)["first"].(map[string]any)["value"])
		}
		return out
	}
	check := func(name string, got []any, want ...float64) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", name, got, want)
				return
			}
		}
	}
	check("full precision", firsts(statsBody{}), 2.675, -2.675, 1.5, -0.5, 0.125, 7)
	check("2 places", firsts(statsBody{"decimalPlaces": 2}), 2.68, -2.68, 1.5, -0.5, 0.13, 7)
	check("0 places", firsts(statsBody{"decimalPlaces": 0}), 3, -3, 2, -1, 0, 7)

	if _, err := env.DB.NewRaw("UPDATE accounts a SET decimal_places = 1 FROM tokens t "+
		"WHERE t.account_id = a.id AND t.hash = sha256(convert_to(?, 'UTF8'))", tok).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	// the change reaches the instance's token cache through a notification (≤ 1 s)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got := firsts(statsBody{}); len(got) > 0 && got[0] == 2.7 {
			break
		}
	}
	check("account setting", firsts(statsBody{}), 2.7, -2.7, 1.5, -0.5, 0.1, 7)
	check("request overrides account", firsts(statsBody{"decimalPlaces": 2}), 2.68, -2.68, 1.5, -0.5, 0.13, 7)
}

func TestStatisticsValidation(t *testing.T) {
	c := env.Client(t)
	ok := []any{statsBody{"variable": "0123456789abcdef01234567"}}
	many := make([]any, 1001)
	for i := range many {
		many[i] = ok[0]
	}
	cases := []struct {
		name   string
		body   any
		query  string
		fields []string
	}{
		{"empty object", statsBody{}, "", []string{"start", "end", "variables"}},
		{"start not an integer", statsBody{"start": "soon", "end": 2, "variables": ok}, "", []string{"start"}},
		{"start with a fraction", statsBody{"start": 1.5, "end": 2, "variables": ok}, "", []string{"start"}},
		{"end null", statsBody{"start": 1, "end": nil, "variables": ok}, "", []string{"end"}},
		{"end before start", statsBody{"start": 2, "end": 1, "variables": ok}, "", []string{"end"}},
		{"no variables", statsBody{"start": 1, "end": 2, "variables": []any{}}, "", []string{"variables"}},
		{"variables not a list", statsBody{"start": 1, "end": 2, "variables": "x"}, "", []string{"variables"}},
		{"1001 variables", statsBody{"start": 1, "end": 2, "variables": many}, "", []string{"variables"}},
		{"item not an object", statsBody{"start": 1, "end": 2, "variables": []any{ok[0], "x"}}, "", []string{"variables.1"}},
		{"item without variable", statsBody{"start": 1, "end": 2, "variables": []any{statsBody{"device": "~d"}}}, "", []string{"variables.0.variable"}},
		{"variable not a string", statsBody{"start": 1, "end": 2, "variables": []any{statsBody{"variable": 5}}}, "", []string{"variables.0.variable"}},
		{"variable blank", statsBody{"start": 1, "end": 2, "variables": []any{statsBody{"variable": ""}}}, "", []string{"variables.0.variable"}},
		{"label without device", statsBody{"start": 1, "end": 2, "variables": []any{ok[0], statsBody{"variable": "~t"}}}, "", []string{"variables.1.device"}},
		{"device not a string", statsBody{"start": 1, "end": 2, "variables": []any{statsBody{"variable": "~t", "device": 1}}}, "", []string{"variables.0.device"}},
		{"unknown aggregation", statsBody{"start": 1, "end": 2, "variables": ok, "aggregations": []any{"mean", "median"}}, "", []string{"aggregations.1"}},
		{"aggregation not a string", statsBody{"start": 1, "end": 2, "variables": ok, "aggregations": []any{3}}, "", []string{"aggregations.0"}},
		{"no aggregations", statsBody{"start": 1, "end": 2, "variables": ok, "aggregations": []any{}}, "", []string{"aggregations"}},
		{"bad method", statsBody{"start": 1, "end": 2, "variables": ok, "aggregations": []any{"twa"}, "method": "step"}, "", []string{"method"}},
		{"negative max_gap", statsBody{"start": 1, "end": 2, "variables": ok, "aggregations": []any{"coverage"}, "max_gap": -1}, "", []string{"max_gap"}},
		{"decimalPlaces 17", statsBody{"start": 1, "end": 2, "variables": ok, "decimalPlaces": 17}, "", []string{"decimalPlaces"}},
		{"decimalPlaces -1", statsBody{"start": 1, "end": 2, "variables": ok, "decimalPlaces": -1}, "", []string{"decimalPlaces"}},
		{"decimalPlaces string", statsBody{"start": 1, "end": 2, "variables": ok, "decimalPlaces": "two"}, "", []string{"decimalPlaces"}},
		{"everything at once", statsBody{"start": 3, "end": 1, "variables": []any{statsBody{"variable": "~x"}}, "aggregations": []any{"avg"}, "decimalPlaces": 99},
			"", []string{"end", "variables.0.device", "aggregations.0", "decimalPlaces"}},
		{"not JSON", "{", "", []string{"body"}},
		{"a list", "[]", "", []string{"body"}},
		{"bad explain", statsBody{"start": 1, "end": 2, "variables": ok}, "?explain=plan", []string{"explain"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Post(statsPath+tc.query, tc.body)
			var got struct {
				Code    int                 `json:"code"`
				Message string              `json:"message"`
				Detail  map[string][]string `json:"detail"`
			}
			if r.Status != 400 || json.Unmarshal(r.Body, &got) != nil || got.Code != 400001 || got.Message != "Validation Error." {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			var fields []string
			for f, msgs := range got.Detail {
				fields = append(fields, f)
				if len(msgs) == 0 || msgs[0] == "" {
					t.Errorf("%s has no message", f)
				}
			}
			sort.Strings(fields)
			want := append([]string(nil), tc.fields...)
			sort.Strings(want)
			if strings.Join(fields, ",") != strings.Join(want, ",") {
				t.Fatalf("fields %v, want %v: %s", fields, want, r.Body)
			}
		})
	}
}

func TestStatisticsAuthentication(t *testing.T) {
	c := env.Client(t)
	body := statsBody{"start": 1, "end": 2, "variables": []any{statsBody{"variable": "0123456789abcdef01234567"}}}
	for _, path := range []string{statsPath, strings.TrimSuffix(statsPath, "/")} {
		if r := c.As("").Post(path, body); r.Status != 401 || string(r.Body) != `{"detail":"Authentication credentials were not provided."}` {
			t.Errorf("%s without token: %d %s", path, r.Status, r.Body)
		}
		if r := c.As("wrong").Post(path, body); r.Status != 401 || string(r.Body) != `{"detail":"Incorrect authentication credentials."}` {
			t.Errorf("%s with a wrong token: %d %s", path, r.Status, r.Body)
		}
		if r := c.As("").Post(path+"?token="+env.AdminToken, body); r.Status != 200 {
			t.Errorf("%s with the token in the query: %d %s", path, r.Status, r.Body)
		}
	}
}

func TestStatisticsExplain(t *testing.T) {
	c := env.Client(t)
	dev := unique("stats-explain")
	s := env.Seed(t, env.AdminToken, dev, "v", irregularSeries(4, 50))
	// busy neighbours in the same chunks, as in any real deployment: reading the chunks
	// whole would be the wrong plan. The planner sizes a parameterized lookup by the
	// number of distinct variables, so there are many of them.
	for i := range 40 {
		env.Seed(t, env.AdminToken, dev, fmt.Sprintf("noise-%d", i), irregularSeries(uint64(6+i), 250))
	}
	// The plan depends on the statistics: take them now rather than whenever autovacuum
	// gets to the fresh chunks (without them the planner guesses, and may scan).
	if _, err := env.DB.ExecContext(context.Background(), `ANALYZE "values"`); err != nil {
		t.Fatal(err)
	}
	body := statsBody{"start": t0, "end": t0 + 1e9, "aggregations": []string{"mean", "p50"},
		"variables": []any{statsBody{"variable": s.VariableID}, statsBody{"variable": "~v", "device": "~none"}}}

	t.Run("sql", func(t *testing.T) {
		r := c.Post(statsPath+"?explain=sql", body)
		var got struct {
			SQL  string            `json:"sql"`
			Args []json.RawMessage `json:"args"`
		}
		if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil || got.SQL == "" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if strings.Contains(got.SQL, s.VariableID) || !strings.Contains(string(r.Body), s.VariableID) {
			t.Errorf("the variable id should travel in args, not in the SQL: %s", r.Body)
		}
		if strings.Count(got.SQL, "?") != len(got.Args) {
			t.Errorf("%d placeholders for %d args", strings.Count(got.SQL, "?"), len(got.Args))
		}
		if !strings.Contains(got.SQL, "percentile_cont") || strings.Contains(got.SQL, "stddev_samp") {
			t.Errorf("the statement should compute exactly what was asked:\n%s", got.SQL)
		}
		if strings.Contains(string(r.Body), `"results"`) {
			t.Errorf("explain=sql answered results: %s", r.Body)
		}
	})
	t.Run("the shown statement is the one that runs", func(t *testing.T) {
		r := c.Post(statsPath+"?explain=sql", body)
		var shown struct {
			SQL  string `json:"sql"`
			Args []any  `json:"args"`
		}
		if err := json.Unmarshal(r.Body, &shown); err != nil {
			t.Fatal(err)
		}
		args := make([]any, len(shown.Args))
		for i, a := range shown.Args {
			if l, ok := a.([]any); ok {
				ss := make([]string, len(l))
				for j := range l {
					ss[j] = l[j].(string)
				}
				a = ss
			}
			args[i] = a
		}
		var rows []map[string]any
		if err := env.DB.NewRaw(shown.SQL, store.BindArgs(args)...).Scan(context.Background(), &rows); err != nil {
			t.Fatal(err)
		}
		ref := referenceStats(irregularSeries(4, 50), t0, t0+1e9)
		if len(rows) != 2 || rows[1]["variable_id"] != nil || !closeTo(rows[0]["mean_value"].(float64), ref.mean) {
			t.Fatalf("rows %v", rows)
		}
	})
	t.Run("analyze", func(t *testing.T) {
		r := c.Post(statsPath+"?explain=analyze", body)
		var got struct {
			SQL         string         `json:"sql"`
			Args        []any          `json:"args"`
			Plan        map[string]any `json:"plan"`
			ExecutionMS *float64       `json:"execution_ms"`
		}
		if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if got.SQL == "" || len(got.Args) == 0 || got.Plan["Plan"] == nil || got.ExecutionMS == nil || *got.ExecutionMS <= 0 {
			t.Fatalf("incomplete answer: %s", r.Body)
		}
		plan, _ := json.Marshal(got.Plan)
		if !strings.Contains(string(plan), "values_variable_ts_idx") {
			t.Errorf("values not read through the (variable_id, ts) index: %s", plan)
		}
	})
}

// TestStdFromRollupsIsStable: std is answered from the minute rollups' spreads, and for
// values like 1e6 ± 0.01, written in batches that merge into existing minutes, it equals
// a two-pass computation to 1e-9 relative (a sum of squares would be wrong in the
// first digits), also over ranges with millisecond edges inside minutes.
func TestStdFromRollupsIsStable(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	rng := rand.New(rand.NewPCG(3, 5))
	const n = 3000
	ts := make([]int64, n)
	vals := make([]float64, n)
	for i := range ts {
		ts[i] = 1_767_225_600_000 + int64(i)*1_700 + rng.Int64N(1_000) // several per minute
		vals[i] = 1e6 + (rng.Float64()-0.5)*0.02
	}
	// interleaved batches, so minutes are merged from several writes
	for part := range 3 {
		var dots []map[string]any
		for i := part; i < n; i += 3 {
			dots = append(dots, map[string]any{"value": vals[i], "timestamp": ts[i]})
		}
		if r := c.Post("/api/v1.6/devices/stable/v/values", dots); r.Status != 201 {
			t.Fatalf("write: %d %s", r.Status, r.Body)
		}
	}
	id := c.Get("/api/v2.0/devices/~stable/variables/~v/").Object(t)["id"].(string)
	for _, rg := range [][2]int{{0, n - 1}, {17, n - 40}, {500, 560}, {1000, 2999}, {700, 701}} {
		start, end := ts[rg[0]]+1, ts[rg[1]] // edges inside minutes, to the millisecond
		var in []float64
		for i := range ts {
			if ts[i] >= start && ts[i] <= end {
				in = append(in, vals[i])
			}
		}
		body := statsBody{"start": start, "end": end, "variables": []any{statsBody{"variable": id}},
			"aggregations": []string{"std", "count"}}
		if sql := c.Post("/api/v2.0/data/statistics/?explain=sql", body).Object(t)["sql"].(string); !strings.Contains(sql, "value_minutes") {
			t.Fatal("std does not read the rollups")
		}
		got := entry(t, postStats(t, c, body), 0)["results"].(map[string]any)["std"].(map[string]any)["value"]
		if len(in) < 2 {
			if got != nil {
				t.Errorf("range %v: std %v of one value, want null", rg, got)
			}
			continue
		}
		want := twoPassStd(in)
		if g, ok := got.(float64); !ok || math.Abs(g-want) > 1e-9*want {
			t.Errorf("range %v: std %v, want %v (%d values)", rg, got, want, len(in))
		}
	}
}

// twoPassStd is the sample standard deviation by mean then squared deviations (what
// numpy's std(ddof=1) computes), shifted by the first value to keep every digit.
func twoPassStd(v []float64) float64 {
	shift, mean := v[0], 0.0
	for _, x := range v {
		mean += x - shift
	}
	mean /= float64(len(v))
	m2 := 0.0
	for _, x := range v {
		d := x - shift - mean
		m2 += d * d
	}
	return math.Sqrt(m2 / float64(len(v)-1))
}
