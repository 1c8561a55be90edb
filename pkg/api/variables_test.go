package api_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const variablesPath = "/api/v2.0/variables"

func createVariable(t *testing.T, c *testenv.Client, deviceKey string, body map[string]any) map[string]any {
	t.Helper()
	return expectStatus(t, c.Post(devicesPath+"/"+deviceKey+"/variables/", body), 201)
}

func TestVariableCreateDefaults(t *testing.T) {
	c, _ := freshClient(t)
	did := jsonString(createDevice(t, c, map[string]any{"label": "kitchen", "name": "Kitchen"}), "id")
	v := createVariable(t, c, "~kitchen", map[string]any{"label": "Temperature"})
	id := jsonString(v, "id")
	if !idRe.MatchString(id) || !createdAtRe.MatchString(jsonString(v, "createdAt")) {
		t.Fatalf("id %q createdAt %q", id, v["createdAt"])
	}
	want := fmt.Sprintf(`{"id":%[1]q,"label":"temperature","name":"temperature","description":"",
		"device":{"id":%[3]q,"label":"kitchen","name":"Kitchen","url":"%[2]s/api/v2.0/devices/%[3]s"},
		"icon":"","lastActivity":null,"lastValue":{},"properties":{},"tags":[],"type":"raw","unit":"",
		"syntheticExpression":"","url":"%[2]s/api/v2.0/variables/%[1]s",
		"valuesUrl":"%[2]s/api/v1.6/variables/%[1]s/values","createdAt":%[4]q}`, id, c.URL, did, v["createdAt"])
	for _, path := range []string{variablesPath + "/" + id, variablesPath + "/" + id + "/",
		devicesPath + "/" + did + "/variables/" + id, devicesPath + "/~kitchen/variables/~temperature",
		devicesPath + "/~KITCHEN/variables/~TEMPERATURE/"} {
		expectJSON(t, c.Get(path), 200, want)
	}
	// under another Device of the same account the Variable is not found
	createDevice(t, c, map[string]any{"label": "hall"})
	for _, key := range []string{id, "~temperature"} {
		expectJSON(t, c.Get(devicesPath+"/~hall/variables/"+key), 404,
			`{"code":404001,"message":"Not found.","detail":"Variable '`+key+`' was not found."}`)
	}
}

func TestVariableCreateAllFields(t *testing.T) {
	c, _ := freshClient(t)
	createDevice(t, c, map[string]any{"label": "d"})
	v := createVariable(t, c, "~d", map[string]any{"label": "hum", "name": "Humidity", "description": "relative",
		"unit": "%", "icon": "tint", "tags": []string{"env"}, "type": "raw", "properties": map[string]any{"any": map[string]any{"x": 1}}})
	got := map[string]any{}
	for _, k := range []string{"label", "name", "description", "unit", "icon", "tags", "type", "properties"} {
		got[k] = v[k]
	}
	want := map[string]any{"label": "hum", "name": "Humidity", "description": "relative", "unit": "%", "icon": "tint",
		"tags": []any{"env"}, "type": "raw", "properties": map[string]any{"any": map[string]any{"x": 1.0}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestVariableLastValue(t *testing.T) {
	c, tok := freshClient(t)
	s := env.Seed(t, tok, "d", "temp", nil)
	path := variablesPath + "/" + s.VariableID
	if got := expectStatus(t, c.Get(path), 200); !reflect.DeepEqual(got["lastValue"], map[string]any{}) || got["lastActivity"] != nil {
		t.Fatalf("empty variable: lastValue %v lastActivity %v", got["lastValue"], got["lastActivity"])
	}
	// the last_value columns are kept by ingestion; the API renders them
	sqlExec(t, `UPDATE variables SET last_value = 21.5, last_value_ts = to_timestamp(1700000000.5),
		last_value_context = '{"door":"open"}', last_value_created = to_timestamp(1700000001.25),
		last_activity = to_timestamp(1700000001.25) WHERE id = ?`, s.VariableKey)
	got := expectStatus(t, c.Get(path), 200)
	want := map[string]any{"value": 21.5, "timestamp": 1700000000500.0, "context": map[string]any{"door": "open"}, "created_at": 1700000001250.0}
	if !reflect.DeepEqual(got["lastValue"], want) || got["lastActivity"] != 1700000001250.0 {
		t.Fatalf("lastValue %v lastActivity %v", got["lastValue"], got["lastActivity"])
	}
	// a value without context shows an empty context
	sqlExec(t, `UPDATE variables SET last_value_context = NULL WHERE id = ?`, s.VariableKey)
	if ctx := jsonField(expectStatus(t, c.Get(path), 200), "lastValue", "context"); !reflect.DeepEqual(ctx, map[string]any{}) {
		t.Fatalf("context %v", ctx)
	}
}

func TestVariableValidation(t *testing.T) {
	c, tok := freshClient(t)
	createDevice(t, c, map[string]any{"label": "d"})
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name   string
		body   any
		detail string
	}{
		{"label missing", map[string]any{"name": "x"}, `{"label":["This field is required."]}`},
		{"label invalid", map[string]any{"label": "a/b"}, `{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"name too long", map[string]any{"label": "v", "name": long(201)}, `{"name":["Ensure this field has no more than 200 characters."]}`},
		{"description too long", map[string]any{"label": "v", "description": long(2001)}, `{"description":["Ensure this field has no more than 2000 characters."]}`},
		{"unit too long", map[string]any{"label": "v", "unit": long(101)}, `{"unit":["Ensure this field has no more than 100 characters."]}`},
		{"icon not string", map[string]any{"label": "v", "icon": 1}, `{"icon":["Not a valid string."]}`},
		{"type synthetic", map[string]any{"label": "v", "type": "synthetic"}, `{"type":["\"synthetic\" is not a valid choice."]}`},
		{"tags too long", map[string]any{"label": "v", "tags": []string{long(51)}}, `{"tags.0":["Ensure this field has no more than 50 characters."]}`},
		{"properties not object", map[string]any{"label": "v", "properties": "x"}, `{"properties":["Expected an object."]}`},
		{"properties too large", map[string]any{"label": "v", "properties": map[string]any{"k": long(16400)}}, `{"properties":["Ensure this object is at most 16384 bytes serialized."]}`},
		{"properties lone surrogate", `{"label":"v","properties":{"k":["\ud800"]}}`, `{"properties":["Strings and keys may not contain an unpaired surrogate escape (\\ud800 to \\udfff)."]}`},
		{"properties number beyond numeric", `{"label":"v","properties":{"k":1e131072}}`, `{"properties":["Numbers must be less than 1e131072 in magnitude, with at most 16383 digits after the decimal point."]}`},
		{"body not object", "[]", `{"body":["JSON parse error - expected a JSON object"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectJSON(t, c.Post(devicesPath+"/~d/variables", tc.body), 400,
				`{"code":400001,"message":"Validation Error.","detail":`+tc.detail+`}`)
		})
	}
	if n := sqlCount(t, `SELECT count(*) FROM variables WHERE account_id = ?`, accountIDOf(t, tok)); n != 0 {
		t.Fatalf("%d variables written by invalid requests", n)
	}
	expectJSON(t, c.Post(devicesPath+"/~nope/variables", map[string]any{"label": "v"}), 404,
		`{"code":404001,"message":"Not found.","detail":"Device '~nope' was not found."}`)
}

func TestVariableDuplicateLabel(t *testing.T) {
	c, _ := freshClient(t)
	createDevice(t, c, map[string]any{"label": "a"})
	createDevice(t, c, map[string]any{"label": "b"})
	dup := `{"code":400001,"message":"Validation Error.","detail":{"label":["A variable with this label already exists in this device."]}}`
	createVariable(t, c, "~a", map[string]any{"label": "temp"})
	createVariable(t, c, "~a", map[string]any{"label": "hum"})
	createVariable(t, c, "~b", map[string]any{"label": "temp"}) // same label, another device
	expectJSON(t, c.Post(devicesPath+"/~a/variables", map[string]any{"label": "TEMP"}), 400, dup)
	expectJSON(t, c.Patch(devicesPath+"/~a/variables/~hum", map[string]any{"label": "temp"}), 400, dup)
}

func TestVariablePatchPutDelete(t *testing.T) {
	c, tok := freshClient(t)
	s := env.Seed(t, tok, "d", "temp", []testenv.Point{{TS: 1, Value: 1}, {TS: 2, Value: 2}})
	kept := env.Seed(t, tok, "d", "hum", []testenv.Point{{TS: 1, Value: 1}})
	byID := variablesPath + "/" + s.VariableID
	byDevice := devicesPath + "/~d/variables/~temp"

	got := expectStatus(t, c.Patch(byID, map[string]any{"name": "Temp", "unit": "C", "properties": map[string]any{"a": 1, "b": 2}}), 200)
	if got["name"] != "Temp" || got["unit"] != "C" || got["label"] != "temp" {
		t.Fatalf("PATCH by id: %v", got)
	}
	got = expectStatus(t, c.Patch(byDevice, map[string]any{"properties": map[string]any{"b": nil, "c": 3}, "icon": "fire"}), 200)
	if !reflect.DeepEqual(got["properties"], map[string]any{"a": 1.0, "c": 3.0}) || got["icon"] != "fire" || got["name"] != "Temp" {
		t.Fatalf("PATCH by device path: %v", got)
	}
	before := c.Get(byID)
	expectJSON(t, c.Patch(byID, map[string]any{"name": "x", "type": "synthetic"}), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"type":["\"synthetic\" is not a valid choice."]}}`)
	if after := c.Get(byID); string(after.Body) != string(before.Body) {
		t.Fatal("an invalid PATCH changed the variable")
	}
	expectJSON(t, c.Do("PUT", byID, map[string]any{"name": "x"}), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"label":["This field is required."]}}`)
	got = expectStatus(t, c.Do("PUT", byDevice, map[string]any{"label": "Temp2", "description": "d"}), 200)
	if got["label"] != "temp2" || got["description"] != "d" || got["name"] != "Temp" {
		t.Fatalf("PUT: %v", got)
	}
	got = expectStatus(t, c.Do("PUT", byID, map[string]any{"label": "temp3", "unit": "K"}), 200)
	if got["label"] != "temp3" || got["unit"] != "K" || got["description"] != "d" {
		t.Fatalf("PUT by id: %v", got)
	}

	expectStatus(t, c.Delete(byID), 204)
	expectJSON(t, c.Get(byID), 404, `{"code":404001,"message":"Not found.","detail":"Variable '`+s.VariableID+`' was not found."}`)
	expectStatus(t, c.Delete(devicesPath+"/~d/variables/~hum/"), 204)
	expectJSON(t, c.Delete(devicesPath+"/~d/variables/~hum"), 404, `{"code":404001,"message":"Not found.","detail":"Variable '~hum' was not found."}`)
	if n := sqlCount(t, `SELECT count(*) FROM "values" WHERE variable_id IN (?, ?)`, s.VariableKey, kept.VariableKey); n != 0 {
		t.Fatalf("%d values left after deleting their variables", n)
	}
	if got := expectStatus(t, c.Get(devicesPath+"/~d"), 200)["variablesNumber"]; got != 0.0 {
		t.Fatalf("variablesNumber %v", got)
	}
}

func TestVariableLists(t *testing.T) {
	c, _ := freshClient(t)
	a := createDevice(t, c, map[string]any{"label": "a"})
	createDevice(t, c, map[string]any{"label": "b"})
	ids := map[string]string{}
	for _, v := range []struct{ device, label, name string }{
		{"a", "temp", "Temperature"}, {"a", "hum", "Humidity"}, {"b", "temp", "Temp B"}, {"b", "co2", "CO2"},
	} {
		ids[v.device+"/"+v.label] = jsonString(createVariable(t, c, "~"+v.device, map[string]any{"label": v.label, "name": v.name}), "id")
	}
	other, _ := freshClient(t)
	createDevice(t, other, map[string]any{"label": "a"})
	createVariable(t, other, "~a", map[string]any{"label": "temp"})

	deviceOf := func(body map[string]any) []string {
		out := []string{}
		for _, r := range body["results"].([]any) {
			out = append(out, jsonString(r.(map[string]any), "device", "label")+"/"+jsonString(r.(map[string]any), "label"))
		}
		return out
	}
	cases := []struct {
		path string
		want []string
	}{
		{variablesPath, []string{"b/co2", "b/temp", "a/hum", "a/temp"}},
		{devicesPath + "/~a/variables", []string{"a/hum", "a/temp"}},
		{devicesPath + "/" + jsonString(a, "id") + "/variables?sort_by=label", []string{"a/hum", "a/temp"}},
		{devicesPath + "/~b/variables?label=temp", []string{"b/temp"}},
		{variablesPath + "?label=temp", []string{"b/temp", "a/temp"}},
		{variablesPath + "?id=" + ids["a/hum"], []string{"a/hum"}},
		{variablesPath + "?id__in=" + ids["a/hum"] + "," + ids["b/co2"], []string{"b/co2", "a/hum"}},
		{variablesPath + "?id__in=" + ids["a/hum"] + ",zzz", []string{"a/hum"}}, // a malformed item spoils nothing
		{variablesPath + "?device=" + jsonString(a, "id"), []string{"a/hum", "a/temp"}},
		{variablesPath + "?device__id=" + jsonString(a, "id"), []string{"a/hum", "a/temp"}},
		{variablesPath + "?device__label=b", []string{"b/co2", "b/temp"}},
		{variablesPath + "?device__label__in=a,b&label__in=co2,hum", []string{"b/co2", "a/hum"}},
		{variablesPath + "?search=temp", []string{"b/temp", "a/temp"}},
		{variablesPath + "?sort_by=name", []string{"b/co2", "a/hum", "b/temp", "a/temp"}},
		{variablesPath + "?device=nothex", []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			body := expectStatus(t, c.Get(tc.path), 200)
			if got := deviceOf(body); !reflect.DeepEqual(got, tc.want) || body["count"] != float64(len(tc.want)) {
				t.Fatalf("got %v (count %v), want %v", got, body["count"], tc.want)
			}
		})
	}
	body := expectStatus(t, c.Get(variablesPath+"?page_size=3&page=2&label__in=temp,hum,co2"), 200)
	if body["count"] != 4.0 || len(body["results"].([]any)) != 1 || body["next"] != nil ||
		body["previous"] != c.URL+variablesPath+"?label__in=temp%2Chum%2Cco2&page=1&page_size=3" {
		t.Fatalf("page 2: %s", mustJSON(t, body))
	}
}

func TestVariableIsolation(t *testing.T) {
	c, _ := freshClient(t)
	other, _ := freshClient(t)
	d := createDevice(t, other, map[string]any{"label": "secret"})
	v := createVariable(t, other, "~secret", map[string]any{"label": "v"})
	createDevice(t, c, map[string]any{"label": "mine"})
	id := jsonString(v, "id")
	varNotFound := func(key string) string {
		return `{"code":404001,"message":"Not found.","detail":"Variable '` + key + `' was not found."}`
	}
	cases := []struct {
		method, path string
		body         any
		detail       string
	}{
		{"GET", variablesPath + "/" + id, nil, varNotFound(id)},
		{"PATCH", variablesPath + "/" + id, map[string]any{"name": "x"}, varNotFound(id)},
		{"PUT", variablesPath + "/" + id, map[string]any{"label": "x"}, varNotFound(id)},
		{"DELETE", variablesPath + "/" + id, nil, varNotFound(id)},
		// another account's variable id under one's own device
		{"GET", devicesPath + "/~mine/variables/" + id, nil, varNotFound(id)},
		{"PATCH", devicesPath + "/~mine/variables/" + id, map[string]any{"name": "x"}, varNotFound(id)},
		{"PUT", devicesPath + "/~mine/variables/" + id, map[string]any{"label": "x"}, varNotFound(id)},
		{"DELETE", devicesPath + "/~mine/variables/" + id, nil, varNotFound(id)},
		// a label is only a key under its device
		{"GET", variablesPath + "/~v", nil, varNotFound("~v")},
		{"GET", variablesPath + "/nothex", nil, varNotFound("nothex")},
		{"GET", devicesPath + "/" + jsonString(d, "id") + "/variables/" + id, nil,
			`{"code":404001,"message":"Not found.","detail":"Device '` + jsonString(d, "id") + `' was not found."}`},
	}
	for _, tc := range cases {
		expectJSON(t, c.Do(tc.method, tc.path, tc.body), 404, tc.detail)
	}
	for _, q := range []string{"", "?id=" + id, "?device=" + jsonString(d, "id"), "?device__label=secret", "?search=v"} {
		if body := expectStatus(t, c.Get(variablesPath+q), 200); body["count"] != 0.0 {
			t.Fatalf("%s: another account's variable listed: %v", q, body)
		}
	}
	if got := expectStatus(t, other.Get(variablesPath+"/"+url.PathEscape(id)), 200); got["name"] != "v" {
		t.Fatalf("other account's variable changed: %v", got)
	}
}
