package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// signalFixture is testdata/signal/fixtures.json, written by gen.py beside it: the
// time-aware aggregations (API.md §20) computed by numpy, the E8 fill by pandas.
type signalFixture struct {
	Points      map[string][][2]json.Number `json:"points"`
	Statistics  []parityCase                `json:"statistics"`
	Resample    []parityCase                `json:"resample"`
	Aggregation []parityCase                `json:"aggregation"`
	// Property: random requests (endpoint, aggregation, method, max_gap, period,
	// zone, range, fill) over random irregular series, by gen.py's seeded generator
	Property []struct {
		parityCase
		Kind string `json:"kind"`
	} `json:"property"`
}

// TestSignalAnalytics replays every case of the fixture (each aggregation × method ×
// with and without max_gap, in UTC, Europe/Berlin across its DST changes and
// Asia/Kathmandu; random millisecond ranges, so values outside them shape the edges;
// a counter with restarts; silences of months; every fill) against E7, E8 and E9 on
// the real database, first over rows, then with every day packed: timestamps equal,
// values within 1e-9 relative. Both runs read whole tiles wherever their inside has no
// gap wider than max_gap (the tile path; packed days: quarters and days, no minutes);
// between them signalPaths replays the E8 and E9 property cases over the raw path and
// over tiles that are behind.
func TestSignalAnalytics(t *testing.T) {
	t.Parallel() // its own account, read-only once seeded
	var fx signalFixture
	loadFixture(t, "testdata/signal/fixtures.json", &fx)
	if len(fx.Statistics) == 0 || len(fx.Resample) == 0 || len(fx.Aggregation) == 0 {
		t.Fatal("the fixture has no cases; regenerate it with testdata/signal/gen.py")
	}
	c := env.Client(t).As(env.NewAccount(t))
	vars := seedTiers(t, c, fx.Points)
	ids := map[string]string{}
	for n, v := range vars {
		ids[n] = v.ID
	}
	t.Run("rows", func(t *testing.T) { signalCases(t, c, ids, fx) })
	t.Run("paths", func(t *testing.T) { signalPaths(t, ids, vars, fx) })
	packVars(t, vars)
	t.Run("packed", func(t *testing.T) { signalCases(t, c, ids, fx) })
}

// packVars packs every day of the variables' values (the packed layout, issue 32), and
// fails when none was packed. Only the fixtures' variables are packed: other tests of
// this package count their rows.
func packVars(t *testing.T, vars map[string]*testenv.Var) {
	t.Helper()
	st := &values.Store{Pool: env.DB.Pool}
	packed := 0
	for _, v := range vars {
		if len(v.Pts) == 0 {
			continue
		}
		first, last := v.Pts[0].TS, v.Pts[0].TS
		for _, p := range v.Pts {
			first, last = min(first, p.TS), max(last, p.TS)
		}
		for day := values.Day(testenv.RefTime(first)); !day.After(testenv.RefTime(last)); day = day.Add(24 * time.Hour) {
			n, err := st.PackDay(context.Background(), v.Key, day)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				packed++
			}
		}
	}
	if packed == 0 {
		t.Fatal("no day packed")
	}
}

func signalCases(t *testing.T, c *testenv.Client, ids map[string]string, fx signalFixture) {
	run := func(t *testing.T, path string, cases []parityCase) {
		for _, pc := range cases {
			t.Run(pc.Name, func(t *testing.T) {
				c := parallelCase(t, c)
				body, _ := withIDs(pc.Body, ids)
				got := signalPost(t, c, path, body)
				if err := sameResults(testenv.DecodeNumbers(t, pc.Expected), testenv.DecodeNumbers(t, got)); err != nil {
					t.Fatalf("%v\nbody %v\n got %s\nwant %s", err, body, got, pc.Expected)
				}
			})
		}
	}
	t.Run("resample", func(t *testing.T) { run(t, resamplePath, fx.Resample) })
	t.Run("aggregation", func(t *testing.T) { run(t, aggregationPath, fx.Aggregation) })
	t.Run("statistics", func(t *testing.T) {
		for _, pc := range fx.Statistics {
			t.Run(pc.Name, func(t *testing.T) { checkSignalStatistics(t, parallelCase(t, c), ids, pc) })
		}
	})
	t.Run("property", func(t *testing.T) {
		if len(fx.Property) < 30 {
			t.Fatalf("%d property cases; regenerate the fixture with testdata/signal/gen.py", len(fx.Property))
		}
		for _, pc := range fx.Property {
			switch pc.Kind {
			case "statistics":
				t.Run(pc.Name, func(t *testing.T) { checkSignalStatistics(t, parallelCase(t, c), ids, pc.parityCase) })
			case "resample":
				run(t, resamplePath, []parityCase{pc.parityCase})
			default:
				run(t, aggregationPath, []parityCase{pc.parityCase})
			}
		}
	})
}

// signalPost posts an E8 or E9 body and returns its results.
func signalPost(t *testing.T, c *testenv.Client, path string, body map[string]any) json.RawMessage {
	t.Helper()
	r := c.Post(path, body)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var got struct {
		Results json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	return got.Results
}

// checkSignalStatistics compares an E7 answer with the fixture: per variable, the
// requested aggregations' values ({} where the range holds no data and no signal).
func checkSignalStatistics(t *testing.T, c *testenv.Client, ids map[string]string, pc parityCase) {
	t.Helper()
	body := map[string]any{}
	for k, v := range pc.Body {
		body[k] = v
	}
	var refs []map[string]string
	for _, n := range pc.Body["variables"].([]any) {
		refs = append(refs, map[string]string{"variable": ids[n.(string)]})
	}
	body["variables"] = refs
	r := c.Post("/api/v2.0/data/statistics/", body)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var got struct {
		Results []struct {
			Results map[string]struct {
				Value json.Number `json:"value"`
			} `json:"results"`
		} `json:"results"`
	}
	var want []map[string]json.Number
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(pc.Expected, &want); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != len(want) {
		t.Fatalf("%d results, want %d: %s", len(got.Results), len(want), r.Body)
	}
	for i, w := range want {
		g := got.Results[i].Results
		if len(g) != len(w) {
			t.Fatalf("variable %d: %d aggregations, want %d: %s", i, len(g), len(w), r.Body)
		}
		for name, wv := range w {
			var wantV, gotV any
			if wv != "" {
				wantV = wv
			}
			if gv := g[name].Value; gv != "" {
				gotV = gv
			}
			if err := testenv.SameScalar(wantV, gotV, false); err != nil {
				t.Errorf("variable %d %s: %v\nbody %v\n got %s", i, name, err, body, r.Body)
			}
		}
	}
	if t.Failed() {
		t.Logf("want %s", pc.Expected)
	}
}

// TestSignalExplain: explain=sql shows the one statement of a time-aware request
// (intervals by lead(), the fill by windows, whole tiles whose longest interval is within
// max_gap, named in the notes), the user's numbers as arguments; an
// extended fill by previous gives leading buckets the value before start.
func TestSignalExplain(t *testing.T) {
	c := env.Client(t)
	v := env.Seed(t, c.Token, "signal-explain", "temp", []testenv.Point{
		{TS: 1_700_000_000_000, Value: 4}, {TS: 1_700_010_000_000, Value: 8}})
	body := map[string]any{"variables": []string{v.VariableID}, "aggregation": "twa", "period": "1H", "tz": "Asia/Kathmandu",
		"start": 1_700_003_600_000, "end": 1_700_020_000_000, "method": "linear", "max_gap": 1234.5,
		"fill": "previous", "fill_limit": 7, "extend": true}
	r := c.Post(resamplePath+"?explain=sql", body)
	var sqlOnly struct {
		SQL  string `json:"sql"`
		Args []any  `json:"args"`
	}
	if err := json.Unmarshal(r.Body, &sqlOnly); err != nil || r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	for _, want := range []string{"lead(p.ts) OVER w", "refilled AS", "packed_dots("} {
		if !strings.Contains(sqlOnly.SQL, want) {
			t.Fatalf("explain=sql lacks %q: %s", want, sqlOnly.SQL)
		}
	}
	if strings.Contains(sqlOnly.SQL, "1234") || !strings.Contains(string(r.Body), "1234500") {
		t.Fatalf("max_gap must travel as an argument: %s", r.Body)
	}
	// the range holds whole quarters: the tile path, which the notes name
	if !strings.Contains(sqlOnly.SQL, "m.longest_ms::float8 <= ?::float8") || !strings.Contains(string(r.Body), "time-aware over tiles") ||
		!strings.Contains(string(r.Body), "value_quarters: whole tiles") {
		t.Fatalf("explain=sql shows no tile path: %s", r.Body)
	}
	// Values at 22:13:20 and 01:00:00 (UTC): from start (23:13:20) the signal is
	// defined until the last value, not beyond it (nothing is extrapolated), so
	// coverage is 2800 s and 3600 s in the hours 23:00 and 00:00, and the series ends.
	got := signalPost(t, c, resamplePath, map[string]any{"variables": []string{v.VariableID}, "aggregation": "coverage",
		"period": "1H", "start": 1_700_003_600_000, "end": 1_700_020_000_000})
	if string(got) != "[[[1700006400000,3600],[1700002800000,2800]]]" {
		t.Fatalf("coverage after the last value: %s", got)
	}
	// a variable named twice gets its series twice; an unknown id is a 400 naming it
	got = signalPost(t, c, resamplePath, map[string]any{"variables": []string{v.VariableID, v.VariableID},
		"aggregation": "coverage", "period": "1H", "start": 1_700_003_600_000, "end": 1_700_020_000_000})
	if string(got) != "[[[1700006400000,3600],[1700002800000,2800]],[[1700006400000,3600],[1700002800000,2800]]]" {
		t.Fatalf("twice: %s", got)
	}
	r = c.Post(resamplePath, map[string]any{"variables": []string{v.VariableID, "ffffffffffffffffffffffff"},
		"aggregation": "twa", "period": "1H", "start": 1_700_003_600_000})
	if r.Status != 400 || !strings.Contains(string(r.Body), `"variables":["Variable 'ffffffffffffffffffffffff' was not found."]`) {
		t.Fatalf("unknown id: %d %s", r.Status, r.Body)
	}
}

// TestSignalHugeValues: where value × duration or a counter's difference passes the
// largest double, PostgreSQL's float8 arithmetic refuses ("value out of range"); the
// statement runs again with IEEE arithmetic (Query.IEEE) and answers null there, not a
// 500, and the finite answers beside it.
func TestSignalHugeValues(t *testing.T) {
	c := env.Client(t)
	const t0 = 1_700_000_000_000
	dots := []map[string]any{{"timestamp": t0, "value": 1e308}, {"timestamp": t0 + 60_000, "value": -1e308},
		{"timestamp": t0 + 120_000, "value": 1e308}, {"timestamp": t0 + 180_000, "value": 2}}
	if r := c.Post("/api/v1.6/devices/signal-huge/h/values", dots); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	v := struct{ VariableID string }{c.VariableID("signal-huge", "h")}
	for _, agg := range []string{"twa", "integral", "increase", "coverage"} {
		for _, method := range []string{"locf", "linear"} {
			body := map[string]any{"variables": []string{v.VariableID}, "aggregation": agg, "method": method,
				"start": t0, "end": t0 + 240_000}
			e9 := signalPost(t, c, aggregationPath, body)
			body["period"] = "1H"
			e8 := signalPost(t, c, resamplePath, body)
			want := `[[[1700000180000,null]]]`
			if agg == "coverage" {
				want = `[[[1700000180000,180]]]`
			}
			if string(e9) != want {
				t.Errorf("E9 %s %s: %s, want %s", agg, method, e9, want)
			}
			if agg != "coverage" && string(e8) != `[[[1699999200000,null]]]` {
				t.Errorf("E8 %s %s: %s", agg, method, e8)
			}
		}
	}
	r := c.Post("/api/v2.0/data/statistics/", map[string]any{"start": t0, "end": t0 + 240_000,
		"variables": []any{map[string]any{"variable": v.VariableID}}, "aggregations": []string{"twa", "increase", "coverage"}})
	if r.Status != 200 || !strings.Contains(string(r.Body), `"twa":{"value":null},"increase":{"value":null},"coverage":{"value":180}`) {
		t.Fatalf("E7: %d %s", r.Status, r.Body)
	}
}

// TestSignalWithoutRange: without start and end (the last 100 values, API.md §8) the
// range runs from the oldest of the last 100 values, and increase takes the value
// before it as the previous one.
func TestSignalWithoutRange(t *testing.T) {
	c := env.Client(t)
	const t0 = 1_700_000_000_000
	pts := make([]testenv.Point, 150)
	for i := range pts {
		pts[i] = testenv.Point{TS: t0 + int64(i)*10_000, Value: float64(i)}
	}
	v := env.Seed(t, c.Token, "signal-last100", "ramp", pts)
	for agg, want := range map[string]string{
		// values 50 … 149, each held 10 s until the next: the mean of 50 … 148
		"twa": "[[[1700001490000,99]]]", "coverage": "[[[1700001490000,990]]]",
		// 100 contributions of 1: the first from 49, the value before the last 100
		"increase": "[[[1700001490000,100]]]",
	} {
		got := signalPost(t, c, aggregationPath, map[string]any{"variables": []string{v.VariableID}, "aggregation": agg})
		if string(got) != want {
			t.Errorf("%s: %s, want %s", agg, got, want)
		}
	}
}
