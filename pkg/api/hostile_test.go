package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// hostileValues replace one field of a valid body at a time.
var hostileValues = []string{
	`null`, `123`, `-1`, `1e308`, `-1e308`, `1e-320`, `0.5`, `true`, `"x"`, `""`, `[]`, `{}`, `[null]`, `{"a":{"b":[1,{"c":null}]}}`,
	`"NaN"`, `"Infinity"`, `"-Infinity"`, `"1e999"`, `12345678901234567890123`,
	`"` + strings.Repeat("a", 100_000) + `"`, `"'; DROP TABLE devices; --"`, `"\" OR 1=1 --"`, `"~'"`,
	`"\u0000"`, `"` + "\u202e\ufeff" + `"`, `["` + strings.Repeat("t", 60) + `"]`,
	`[` + strings.Repeat(`"t",`, 30) + `"t"]`,
}

// hostileBodies replace the whole body.
var hostileBodies = []string{
	``, ` `, `null`, `[]`, `{}`, `"str"`, `123`, `true`, `{`, `{"a":1,}`, `NaN`, `{"value": NaN}`, `{"value": Infinity}`,
	strings.Repeat(`[`, 20_000) + strings.Repeat(`]`, 20_000), "{\"label\":\"\xff\xfe\"}", `{"label":"a","label":"b"}`,
	`[{"label":"a"}]`, `{"` + strings.Repeat("k", 10_000) + `":1}`,
}

type hostileEndpoint struct {
	method, path string
	base         map[string]any // a valid body; nil: no field mutations
}

// TestHostileInput throws wrong types, missing and extra fields, huge and tiny numbers,
// NaN spellings, deep nesting, invalid UTF-8, duplicate keys, over-long strings and SQL
// fragments at every write and query endpoint: always a 4xx JSON error (or a success
// that stored what was valid), never a 5xx, and stored data reads back unchanged.
func TestHostileInput(t *testing.T) {
	c, _ := freshClient(t)
	// "keep" resources are only ever named by hostile requests; "target" ones take the
	// valid base bodies (which may legitimately change them).
	var keepVar, targetVar string
	for _, dev := range []string{"keep", "target"} {
		c.Post("/api/v1.6/devices/"+dev+"/", map[string]any{"temp": []any{map[string]any{"value": 1.5, "timestamp": 1000, "context": map[string]any{"a": "b"}}}})
		id := jsonString(expectStatus(t, c.Get("/api/v2.0/devices/~"+dev+"/variables/~temp"), 200), "id")
		expectStatus(t, c.Post("/api/v2.0/organizations", map[string]any{"label": dev + "-org"}), 201)
		keepVar, targetVar = targetVar, id
	}
	keepUser, targetUser := uniqueName("keep"), uniqueName("target")
	for _, u := range []string{keepUser, targetUser} {
		expectStatus(t, c.Post("/api/v2.0/users", map[string]any{"username": u, "email": u + "@example.com", "password": "long-enough"}), 200)
	}
	keep := []string{"/api/v2.0/devices/~keep", "/api/v2.0/devices/~keep/variables/~temp", "/api/v2.0/variables/" + keepVar,
		"/api/v1.6/variables/" + keepVar + "/values", "/api/v2.0/organizations/~keep-org", "/api/v2.0/users/~" + keepUser}
	before := snapshot(t, c, keep)

	endpoints := []hostileEndpoint{
		{"POST", "/api/v2.0/users", map[string]any{"username": "h", "email": "h@example.com", "password": "long-enough", "tags": []string{}, "decimalPlaces": 2}},
		{"PATCH", "/api/v2.0/users/~" + targetUser, map[string]any{"firstName": "x", "tags": []string{"a"}, "decimalPlaces": 3, "isActive": true}},
		{"POST", "/api/v2.0/users/~" + targetUser + "/_/assign_organizations", nil},
		{"POST", "/api/v2.0/organizations", map[string]any{"label": "h-org", "name": "n", "properties": map[string]any{}}},
		{"PATCH", "/api/v2.0/organizations/~target-org", map[string]any{"name": "n2", "description": "d"}},
		{"POST", "/api/v2.0/devices", map[string]any{"label": "h-dev", "name": "n", "tags": []string{"a"}, "properties": map[string]any{"_color": "#fff"}, "organization": "~target-org"}},
		{"PATCH", "/api/v2.0/devices/~target", map[string]any{"name": "n", "properties": map[string]any{"_location_type": "manual", "_location_fixed": map[string]any{"lat": 1, "lng": 2}}}},
		{"POST", "/api/v2.0/devices/~target/variables", map[string]any{"label": "h-var", "unit": "C", "tags": []string{"a"}}},
		{"PATCH", "/api/v2.0/variables/" + targetVar, map[string]any{"name": "n", "unit": "F"}},
		{"POST", "/api/v1.6/devices/target", map[string]any{"temp": map[string]any{"value": 1, "timestamp": 2000}}},
		{"POST", "/api/v1.6/devices/target/temp/values", map[string]any{"value": 1, "timestamp": 3000, "context": map[string]any{}}},
		{"POST", "/api/v1.6/variables/" + targetVar + "/values", map[string]any{"value": 1, "timestamp": 4000}},
		{"POST", "/api/v1.6/collections/values", nil},
		{"POST", "/api/v2.0/data/statistics", map[string]any{"start": 0, "end": 10_000, "variables": []any{map[string]any{"variable": keepVar}}, "aggregations": []string{"mean"}, "decimalPlaces": 2}},
	}
	endpoints = append(endpoints, analyticsHostileEndpoints(keepVar)...)

	for _, ep := range endpoints {
		for _, body := range hostileBodies {
			checkHostile(t, c, ep.method, ep.path, body)
		}
		for field := range ep.base {
			for _, v := range hostileValues {
				checkHostile(t, c, ep.method, ep.path, mutate(t, ep.base, field, v))
			}
			checkHostile(t, c, ep.method, ep.path, without(t, ep.base, field))
		}
	}
	for _, p := range hostilePaths(keepVar) {
		for _, m := range []string{"GET", "PATCH", "PUT", "DELETE", "POST"} {
			checkHostile(t, c, m, p, `{}`)
		}
	}
	after := snapshot(t, c, keep)
	for _, p := range keep {
		if after[p] != before[p] {
			t.Errorf("%s changed:\n before %s\n after  %s", p, before[p], after[p])
		}
	}
}

func checkHostile(t *testing.T, c *testenv.Client, method, path, body string) {
	t.Helper()
	r := c.OffContract().Do(method, path, body) // hostile on purpose: only the answer must match the document
	if r.Status >= 500 {
		t.Errorf("%s %s %.120q: %d %s", method, path, body, r.Status, r.Body)
		return
	}
	if r.Status >= 400 {
		var m map[string]any
		if json.Unmarshal(r.Body, &m) != nil || (m["code"] == nil && m["detail"] == nil) {
			t.Errorf("%s %s %.120q: %d without a JSON error body: %s", method, path, body, r.Status, r.Body)
		}
	}
}

func mutate(t *testing.T, base map[string]any, field, raw string) string {
	t.Helper()
	m := map[string]json.RawMessage{}
	for k, v := range base {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	m[field] = json.RawMessage(raw)
	var b strings.Builder
	b.WriteString("{")
	i := 0
	for k, v := range m {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%s", k, v)
		i++
	}
	b.WriteString("}")
	return b.String()
}

func without(t *testing.T, base map[string]any, field string) string {
	t.Helper()
	m := map[string]any{}
	for k, v := range base {
		if k != field {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// hostilePaths are keys, labels and filters with SQL fragments and junk.
func hostilePaths(varID string) []string {
	junk := []string{"'", "%27%3B--", "~'%20OR%201=1", "~" + strings.Repeat("a", 300), "%00", "~%E2%80%AE", "..", "~a%2Fb", "0123456789abcdef0123456z"}
	var out []string
	for _, j := range junk {
		out = append(out, "/api/v2.0/devices/"+j, "/api/v2.0/variables/"+j, "/api/v2.0/users/"+j, "/api/v2.0/organizations/"+j,
			"/api/v2.0/devices/"+j+"/variables/"+j, "/api/v1.6/devices/"+j+"/"+j+"/values", "/api/v1.6/variables/"+j+"/values",
			"/api/v1.6/variables/"+varID+"/values/"+j+"/"+j, "/api/v1.6/variables/"+varID+"/statistics/"+j+"/0/1")
	}
	for _, q := range []string{"label=" + url.QueryEscape("' OR 1=1 --"), "sort_by=label;drop", "page=-1", "page_size=99999999999999999999",
		"id__in=" + url.QueryEscape("',')"), "createdAt__gte=" + url.QueryEscape("'now'"), "tags__contains=" + url.QueryEscape("{\"a\"}"),
		"label__range=a", "isActive__isnull=" + url.QueryEscape("1;--"), "search=" + url.QueryEscape("%_\\'"), "start=x&end=y"} {
		out = append(out, "/api/v2.0/devices?"+q, "/api/v2.0/variables?"+q, "/api/v2.0/users?"+q, "/api/v2.0/organizations?"+q,
			"/api/v1.6/variables/"+varID+"/values?"+q)
	}
	return out
}

func snapshot(t *testing.T, c *testenv.Client, paths []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range paths {
		r := c.Get(p)
		if r.Status != 200 {
			t.Fatalf("snapshot %s: %d %s", p, r.Status, r.Body)
		}
		out[p] = string(r.Body)
	}
	return out
}

// analyticsHostileEndpoints are E8 and E9 with a valid body naming varID.
func analyticsHostileEndpoints(varID string) []hostileEndpoint {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"variables": []string{varID}, "aggregation": "mean", "start": 0, "end": 10_000,
			"tz": "Europe/Berlin", "join_dataframes": false, "precision": 2}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	return []hostileEndpoint{
		{"POST", "/api/v1.6/data/stats/resample", base(map[string]any{"period": "1H"})},
		{"POST", "/api/v1.6/data/stats/aggregation", base(nil)},
	}
}
