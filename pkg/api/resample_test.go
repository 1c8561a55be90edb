package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const (
	resamplePath    = "/api/v1.6/data/stats/resample/"
	aggregationPath = "/api/v1.6/data/stats/aggregation/"
)

func TestResampleErrors(t *testing.T) {
	c := env.Client(t)
	mine := env.Seed(t, c.Token, "err-dev", "temp", []testenv.Point{{TS: 1_700_000_000_000, Value: 1}})
	other := env.Seed(t, env.NewAccount(t), "err-dev", "temp", []testenv.Point{{TS: 1_700_000_000_000, Value: 1}})
	ok := func(extra map[string]any) map[string]any {
		b := map[string]any{"variables": []string{mine.VariableID}, "aggregation": "mean", "period": "1H"}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		want   string // exact body, or a field name the 400001 detail must name
	}{
		{"invalid JSON", resamplePath, `{"variables": [`, 400, `{"detail":"JSON parse error - unexpected end of JSON input at offset 15"}`},
		{"invalid JSON E9", aggregationPath, `{,}`, 400, `{"detail":"JSON parse error - invalid character ',' looking for beginning of object key string at offset 2"}`},
		{"not an object", resamplePath, `[1]`, 400, `{"detail":"JSON parse error - expected a JSON object"}`},
		{"bad period", resamplePath, ok(map[string]any{"period": "15min"}), 400, "period"},
		{"lowercase period", resamplePath, ok(map[string]any{"period": "1h"}), 400, "period"},
		{"zero period", resamplePath, ok(map[string]any{"period": "0T"}), 400, "period"},
		{"period too long", resamplePath, ok(map[string]any{"period": "100001H"}), 400, "period"},
		{"missing period", resamplePath, map[string]any{"variables": []string{mine.VariableID}, "aggregation": "mean"}, 400, "period"},
		{"bad tz", resamplePath, ok(map[string]any{"tz": "Mars/Olympus"}), 400, "tz"},
		{"lowercase tz", resamplePath, ok(map[string]any{"tz": "america/new_york"}), 400, "tz"},
		{"empty tz", resamplePath, ok(map[string]any{"tz": ""}), 400, "tz"},
		{"Local tz", resamplePath, ok(map[string]any{"tz": "Local"}), 400, "tz"},
		// a backward link Go reads from the host zoneinfo and the image's PostgreSQL lacks
		{"tz unknown to PostgreSQL", resamplePath, ok(map[string]any{"tz": "ROC"}), 400, "tz"},
		{"POSIX tz", resamplePath, ok(map[string]any{"tz": "EST+5EDT,M3.2.0/2,M11.1.0/2"}), 400, "tz"},
		{"bad aggregation", resamplePath, ok(map[string]any{"aggregation": "median"}), 400, "aggregation"},
		{"bad aggregation E9", aggregationPath, ok(map[string]any{"aggregation": "avg"}), 400, "aggregation"},
		{"no variables", resamplePath, ok(map[string]any{"variables": []string{}}), 400, "variables"},
		{"start after end", resamplePath, ok(map[string]any{"start": 2000, "end": 1000}), 400, "end"},
		{"start after end E9", aggregationPath, ok(map[string]any{"start": 2000, "end": 1000}), 400, "end"},
		{"precision too big", resamplePath, ok(map[string]any{"precision": 17}), 400, "precision"},
		{"bad explain", resamplePath + "?explain=yes", ok(nil), 400, "explain"},
		// the time-aware fields (API.md §20)
		{"bad method", resamplePath, ok(map[string]any{"aggregation": "twa", "method": "spline"}), 400, "method"},
		{"bad method E9", aggregationPath, ok(map[string]any{"aggregation": "twa", "method": "nearest"}), 400, "method"},
		{"zero max_gap", resamplePath, ok(map[string]any{"aggregation": "twa", "max_gap": 0}), 400, "max_gap"},
		{"text max_gap E9", aggregationPath, ok(map[string]any{"aggregation": "integral", "max_gap": "1h"}), 400, "max_gap"},
		{"bad fill", resamplePath, ok(map[string]any{"fill": "backward"}), 400, "fill"},
		{"zero fill_limit", resamplePath, ok(map[string]any{"fill": "previous", "fill_limit": 0}), 400, "fill_limit"},
		{"bad extend", resamplePath, ok(map[string]any{"extend": 1}), 400, "extend"},
		{"bad time-aware aggregation", resamplePath, ok(map[string]any{"aggregation": "twa_avg"}), 400, "aggregation"},
		{"unknown id", resamplePath, ok(map[string]any{"variables": []string{mine.VariableID, "ffffffffffffffffffffffff"}}), 400,
			`{"code":400001,"message":"Validation Error.","detail":{"variables":["Variable 'ffffffffffffffffffffffff' was not found."]}}`},
		{"other account's id", resamplePath, ok(map[string]any{"variables": []string{other.VariableID}}), 400,
			`{"code":400001,"message":"Validation Error.","detail":{"variables":["Variable '` + other.VariableID + `' was not found."]}}`},
		{"other account's id E9", aggregationPath, ok(map[string]any{"variables": []string{other.VariableID, mine.VariableID}}), 400,
			`{"code":400001,"message":"Validation Error.","detail":{"variables":["Variable '` + other.VariableID + `' was not found."]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Post(tc.path, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if strings.HasPrefix(tc.want, "{") {
				if string(r.Body) != tc.want {
					t.Fatalf("body\n got %s\nwant %s", r.Body, tc.want)
				}
				return
			}
			var b struct {
				Code   int                 `json:"code"`
				Detail map[string][]string `json:"detail"`
			}
			if err := json.Unmarshal(r.Body, &b); err != nil || b.Code != 400001 || len(b.Detail[tc.want]) == 0 {
				t.Fatalf("want a 400001 naming %q, got %s", tc.want, r.Body)
			}
		})
	}
}

func TestResampleUnauthenticated(t *testing.T) {
	anon := env.Client(t).As("")
	for _, p := range []string{resamplePath, aggregationPath, strings.TrimSuffix(resamplePath, "/")} {
		r := anon.Post(p, map[string]any{"variables": []string{"x"}, "aggregation": "mean", "period": "1H"})
		if r.Status != 401 || string(r.Body) != body401001 {
			t.Fatalf("%s: %d %s", p, r.Status, r.Body)
		}
	}
}

func TestResampleExplain(t *testing.T) {
	c := env.Client(t)
	v := env.Seed(t, c.Token, "explain-dev", "temp", []testenv.Point{{TS: 1_700_000_000_000, Value: 1}})
	body := map[string]any{"variables": []string{v.VariableID}, "aggregation": "sum", "period": "D", "tz": "Europe/Berlin"}

	r := c.Post(resamplePath+"?explain=sql", body)
	var sqlOnly struct {
		SQL  string `json:"sql"`
		Args []any  `json:"args"`
	}
	if err := json.Unmarshal(r.Body, &sqlOnly); err != nil || r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if !strings.Contains(sqlOnly.SQL, "generate_series") || strings.Contains(sqlOnly.SQL, "Europe/Berlin") ||
		!strings.Contains(string(r.Body), `"Europe/Berlin"`) || strings.Contains(string(r.Body), "plan") {
		t.Fatalf("explain=sql: %s", r.Body)
	}

	start := time.Now()
	r = c.Post(aggregationPath+"?explain=analyze", map[string]any{"variables": []string{v.VariableID}, "aggregation": "max"})
	var analyzed struct {
		SQL         string         `json:"sql"`
		Plan        map[string]any `json:"plan"`
		ExecutionMS *float64       `json:"execution_ms"`
	}
	if err := json.Unmarshal(r.Body, &analyzed); err != nil || r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if analyzed.SQL == "" || analyzed.Plan["Plan"] == nil ||
		analyzed.ExecutionMS == nil || *analyzed.ExecutionMS > float64(time.Since(start).Milliseconds()+1) {
		t.Fatalf("explain=analyze: %s", r.Body)
	}
}

// "Only start" reads up to now: a value stamped in the future is not part of it, while
// an explicit end reaches it.
func TestResampleOnlyStartStopsAtNow(t *testing.T) {
	c := env.Client(t)
	now := time.Now().UnixMilli()
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	v := env.Seed(t, c.Token, "future-dev", "temp", []testenv.Point{{TS: now - 1000, Value: 2}, {TS: future, Value: 40}})
	cases := []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"start": now - 60_000},
			fmt.Sprintf(`{"results":[[[%d,1]]],"columns":[["timestamp","value.value"]]}`, now-1000)},
		{map[string]any{"start": now - 60_000, "end": future},
			fmt.Sprintf(`{"results":[[[%d,2]]],"columns":[["timestamp","value.value"]]}`, future)},
	}
	for _, tc := range cases {
		tc.body["variables"] = []string{v.VariableID}
		tc.body["aggregation"] = "count"
		r := c.Post(aggregationPath, tc.body)
		if r.Status != 200 || string(r.Body) != tc.want {
			t.Fatalf("%v: %d %s, want %s", tc.body, r.Status, r.Body, tc.want)
		}
	}
}

// A variable named twice gets the same series under both positions, counted once: the
// buckets are grouped by variable and only then given their positions (and without a
// range its last values are read once).
func TestResampleSameVariableTwice(t *testing.T) {
	c := env.Client(t)
	const base = 1_700_000_000_000
	pts := []testenv.Point{{TS: base, Value: 1}, {TS: base + 60_000, Value: 2}, {TS: base + 3_600_000, Value: 4}}
	v := env.Seed(t, c.Token, "twice-dev", "temp", pts)
	post := func(path string, body map[string]any) [][][]float64 {
		t.Helper()
		r := c.Post(path, body)
		var out struct {
			Results [][][]float64 `json:"results"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil || r.Status != 200 {
			t.Fatalf("%v: %d %s", body, r.Status, r.Body)
		}
		return out.Results
	}
	ranges := []map[string]any{{}, {"start": base, "end": base + 7_200_000}}
	for _, rg := range ranges {
		body := func(path string, ids ...string) map[string]any {
			b := map[string]any{"variables": ids, "aggregation": "count"}
			if path == resamplePath {
				b["period"], b["tz"] = "1H", "Asia/Kathmandu"
			}
			for k, val := range rg {
				b[k] = val
			}
			return b
		}
		for _, path := range []string{resamplePath, aggregationPath} {
			once := post(path, body(path, v.VariableID))
			twice := post(path, body(path, v.VariableID, v.VariableID))
			total := 0.0
			for _, row := range once[0] {
				total += row[1]
			}
			if len(once) != 1 || total != float64(len(pts)) {
				t.Fatalf("%s %v: one request counts %v, want %d in all", path, rg, once, len(pts))
			}
			if fmt.Sprint(twice) != fmt.Sprint([][][]float64{once[0], once[0]}) {
				t.Fatalf("%s %v: twice %v, want %v under both positions", path, rg, twice, once[0])
			}
		}
	}
}
