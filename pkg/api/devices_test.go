package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const devicesPath = "/api/v2.0/devices"

func createDevice(t *testing.T, c *testenv.Client, body map[string]any) map[string]any {
	t.Helper()
	return expectStatus(t, c.Post(devicesPath+"/", body), 201)
}

func TestDeviceCreateDefaults(t *testing.T) {
	c, _ := freshClient(t)
	d := createDevice(t, c, map[string]any{"label": "Kitchen-1.a:b_c"})
	id := jsonString(d, "id")
	if !idRe.MatchString(id) {
		t.Fatalf("id %q", id)
	}
	if !createdAtRe.MatchString(jsonString(d, "createdAt")) {
		t.Fatalf("createdAt %q", d["createdAt"])
	}
	want := fmt.Sprintf(`{"id":%q,"label":"kitchen-1.a:b_c","name":"kitchen-1.a:b_c","description":"",
		"isActive":true,"lastActivity":null,"organization":null,"position":{},"tags":[],"properties":{},
		"url":"%[2]s/api/v2.0/devices/%[1]s","variables":"%[2]s/api/v2.0/devices/%[1]s/variables/",
		"variablesNumber":0,"createdAt":%[3]q}`, id, c.URL, d["createdAt"])
	for _, path := range []string{"/" + id, "/" + id + "/", "/~kitchen-1.a:b_c", "/~KITCHEN-1.A:B_C"} {
		expectJSON(t, c.Get(devicesPath+path), 200, want)
	}
	// the variables URL, followed as given, lists the Device's Variables
	if r := c.Get(strings.TrimPrefix(jsonString(d, "variables"), c.URL)); r.Status != 200 || !strings.Contains(string(r.Body), `"count":0`) {
		t.Fatalf("following variables: %d %s", r.Status, r.Body)
	}
}

func TestDeviceCreateAllFields(t *testing.T) {
	c, tok := freshClient(t)
	org := insertOrganization(t, tok, "acme", "Acme Inc.")
	props := map[string]any{
		"_icon": "thermometer", "_color": "rgba(1, 2, 3, 0.5)", "_location_type": "manual",
		"_location_fixed": map[string]any{"lat": -33.5, "lng": 151.25}, "_location_variable": "GPS",
		"_config": map[string]any{"mode": map[string]any{"text": "Mode", "type": "list", "description": "d",
			"options": []string{"a", "b"}, "value": "a"}},
	}
	d := createDevice(t, c, map[string]any{"label": "pump", "name": "Pump #1", "description": "in the cellar",
		"isActive": false, "tags": []string{"b", "a"}, "properties": props, "organization": "~ACME"})
	id := jsonString(d, "id")
	wantProps := `{"_icon":"thermometer","_color":"rgba(1, 2, 3, 0.5)","_location_type":"manual",
		"_location_fixed":{"lat":-33.5,"lng":151.25},"_location_variable":"gps",
		"_config":{"mode":{"text":"Mode","type":"list","description":"d","options":["a","b"],"value":"a"}}}`
	want := fmt.Sprintf(`{"id":%q,"label":"pump","name":"Pump #1","description":"in the cellar",
		"isActive":false,"lastActivity":null,
		"organization":{"id":%[4]q,"label":"acme","name":"Acme Inc.","url":"%[2]s/api/v2.0/organizations/%[4]s"},
		"position":{"lat":-33.5,"lng":151.25},"tags":["b","a"],"properties":%[5]s,
		"url":"%[2]s/api/v2.0/devices/%[1]s","variables":"%[2]s/api/v2.0/devices/%[1]s/variables/",
		"variablesNumber":0,"createdAt":%[3]q}`, id, c.URL, d["createdAt"], org, wantProps)
	expectJSON(t, c.Get(devicesPath+"/"+id), 200, want)

	// organization by id
	d = createDevice(t, c, map[string]any{"label": "valve", "organization": org})
	if jsonString(d, "organization", "id") != org {
		t.Fatalf("organization by id: %v", d["organization"])
	}
}

func TestDevicePositionAndActivity(t *testing.T) {
	c, _ := freshClient(t)
	fixed := map[string]any{"lat": 1, "lng": 2}
	cases := []struct {
		props map[string]any
		want  map[string]any
	}{
		{map[string]any{"_location_type": "manual", "_location_fixed": fixed}, map[string]any{"lat": 1.0, "lng": 2.0}},
		{map[string]any{"_location_type": "auto", "_location_fixed": fixed}, map[string]any{}},
		{map[string]any{"_location_type": "manual"}, map[string]any{}},
		{map[string]any{"_location_fixed": fixed}, map[string]any{}},
	}
	for i, tc := range cases {
		d := createDevice(t, c, map[string]any{"label": fmt.Sprintf("p%d", i), "properties": tc.props})
		if got := d["position"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: position %v, want %v", tc.props, got, tc.want)
		}
	}
	// lastActivity is written by ingestion; it is rendered as ms
	id := jsonString(createDevice(t, c, map[string]any{"label": "busy"}), "id")
	sqlExec(t, `UPDATE devices SET last_activity = to_timestamp(1700000000.123) WHERE public_id = ?`, id)
	if got := expectStatus(t, c.Get(devicesPath+"/"+id), 200)["lastActivity"]; got != 1700000000123.0 {
		t.Fatalf("lastActivity %v", got)
	}
}

func TestDeviceValidation(t *testing.T) {
	c, tok := freshClient(t)
	otherOrg := insertOrganization(t, env.NewAccount(t), "theirs", "Theirs")
	long := func(n int) string { return strings.Repeat("a", n) }
	manyTags := make([]string, 21)
	for i := range manyTags {
		manyTags[i] = fmt.Sprint(i)
	}
	withProps := func(p any) map[string]any { return map[string]any{"label": "ok", "properties": p} }
	cases := []struct {
		name   string
		body   any
		detail string
	}{
		{"label missing", map[string]any{"name": "x"}, `{"label":["This field is required."]}`},
		{"label not string", map[string]any{"label": 5}, `{"label":["Not a valid string."]}`},
		{"label null", map[string]any{"label": nil}, `{"label":["This field may not be null."]}`},
		{"label empty", map[string]any{"label": ""}, `{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"label bad start", map[string]any{"label": "-x"}, `{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"label bad char", map[string]any{"label": "a b"}, `{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"label too long", map[string]any{"label": long(101)}, `{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"name too long", map[string]any{"label": "ok", "name": long(201)}, `{"name":["Ensure this field has no more than 200 characters."]}`},
		{"name blank", map[string]any{"label": "ok", "name": ""}, `{"name":["This field may not be blank."]}`},
		{"description too long", map[string]any{"label": "ok", "description": long(2001)}, `{"description":["Ensure this field has no more than 2000 characters."]}`},
		{"isActive not bool", map[string]any{"label": "ok", "isActive": "yes"}, `{"isActive":["Must be a valid boolean."]}`},
		{"tags not list", map[string]any{"label": "ok", "tags": "a"}, `{"tags":["Expected a list of items."]}`},
		{"too many tags", map[string]any{"label": "ok", "tags": manyTags}, `{"tags":["Ensure this field has no more than 20 elements."]}`},
		{"tag too long", map[string]any{"label": "ok", "tags": []string{"a", long(51)}}, `{"tags.1":["Ensure this field has no more than 50 characters."]}`},
		{"tag not string", map[string]any{"label": "ok", "tags": []any{1}}, `{"tags.0":["Not a valid string."]}`},
		{"properties not object", withProps([]int{1}), `{"properties":["Expected an object."]}`},
		{"properties too large", withProps(map[string]any{"_icon": long(16400)}), `{"properties":["Ensure this object is at most 16384 bytes serialized."]}`},
		{"unknown attribute", withProps(map[string]any{"_colour": "#fff"}), `{"properties._colour":["Unknown attribute; allowed: _icon, _color, _location_type, _location_variable, _location_fixed, _config."]}`},
		{"attribute without underscore", withProps(map[string]any{"icon": "x"}), `{"properties.icon":["Unknown attribute; allowed: _icon, _color, _location_type, _location_variable, _location_fixed, _config."]}`},
		{"icon not string", withProps(map[string]any{"_icon": 1}), `{"properties._icon":["Not a valid string."]}`},
		{"color name", withProps(map[string]any{"_color": "red"}), `{"properties._color":["Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."]}`},
		{"color 4 hex", withProps(map[string]any{"_color": "#ffff"}), `{"properties._color":["Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."]}`},
		{"color rgb 256", withProps(map[string]any{"_color": "rgb(256,0,0)"}), `{"properties._color":["Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."]}`},
		{"color rgba alpha 2", withProps(map[string]any{"_color": "rgba(0,0,0,2)"}), `{"properties._color":["Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."]}`},
		{"color rgb 2 parts", withProps(map[string]any{"_color": "rgb(1,2)"}), `{"properties._color":["Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."]}`},
		{"location type", withProps(map[string]any{"_location_type": "gps"}), `{"properties._location_type":["\"gps\" is not a valid choice."]}`},
		{"location variable", withProps(map[string]any{"_location_variable": "a b"}), `{"properties._location_variable":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."]}`},
		{"location fixed not object", withProps(map[string]any{"_location_fixed": "1,2"}), `{"properties._location_fixed":["Expected an object."]}`},
		{"lat out of range", withProps(map[string]any{"_location_fixed": map[string]any{"lat": 90.5, "lng": 0}}), `{"properties._location_fixed.lat":["Ensure this value is less than or equal to 90."]}`},
		{"lng out of range", withProps(map[string]any{"_location_fixed": map[string]any{"lat": 0, "lng": -180.1}}), `{"properties._location_fixed.lng":["Ensure this value is greater than or equal to -180."]}`},
		{"lat a string", withProps(map[string]any{"_location_fixed": map[string]any{"lat": "1", "lng": 0}}), `{"properties._location_fixed.lat":["A valid number is required."]}`},
		{"lng missing", withProps(map[string]any{"_location_fixed": map[string]any{"lat": 1}}), `{"properties._location_fixed.lng":["This field is required."]}`},
		{"location extra field", withProps(map[string]any{"_location_fixed": map[string]any{"lat": 1, "lng": 1, "alt": 3}}), `{"properties._location_fixed.alt":["Unknown field."]}`},
		{"config not object", withProps(map[string]any{"_config": []int{}}), `{"properties._config":["Expected an object."]}`},
		{"config entry not object", withProps(map[string]any{"_config": map[string]any{"k": "v"}}), `{"properties._config.k":["Expected an object."]}`},
		{"config type", withProps(map[string]any{"_config": map[string]any{"k": map[string]any{"type": "color"}}}), `{"properties._config.k.type":["\"color\" is not a valid choice."]}`},
		{"config options", withProps(map[string]any{"_config": map[string]any{"k": map[string]any{"type": "list", "options": []any{"a", 2}}}}), `{"properties._config.k.options.1":["Not a valid string."]}`},
		{"config value not string", withProps(map[string]any{"_config": map[string]any{"k": map[string]any{"value": 3}}}), `{"properties._config.k.value":["Not a valid string."]}`},
		{"config unknown field", withProps(map[string]any{"_config": map[string]any{"k": map[string]any{"default": "x"}}}), `{"properties._config.k.default":["Unknown field."]}`},
		{"organization unknown", map[string]any{"label": "ok", "organization": "~nope"}, `{"organization":["Organization '~nope' was not found."]}`},
		{"organization malformed", map[string]any{"label": "ok", "organization": "nope"}, `{"organization":["Organization 'nope' was not found."]}`},
		{"organization of another account", map[string]any{"label": "ok", "organization": otherOrg}, fmt.Sprintf(`{"organization":["Organization '%s' was not found."]}`, otherOrg)},
		{"organization not string", map[string]any{"label": "ok", "organization": 1}, `{"organization":["Not a valid string."]}`},
		{"several fields at once", map[string]any{"label": "-", "tags": "x", "properties": map[string]any{"_color": 1}},
			`{"label":["Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."],"tags":["Expected a list of items."],"properties._color":["Not a valid string."]}`},
		{"NUL in name", `{"label":"ok","name":"a\u0000b"}`, `{"name":["Null characters are not allowed."]}`},
		{"NUL in tag", `{"label":"ok","tags":["\u0000"]}`, `{"tags.0":["Null characters are not allowed."]}`},
		{"NUL in properties", `{"label":"ok","properties":{"_icon":"\u0000"}}`, `{"properties":["Null characters are not allowed."]}`},
		{"NUL in a properties key", `{"label":"ok","properties":{"_config":{"a\u0000":{}}}}`, `{"properties":["Null characters are not allowed."]}`},
		{"lone surrogate in a properties key", `{"label":"ok","properties":{"_config":{"\udc00":{}}}}`, `{"properties":["Strings and keys may not contain an unpaired surrogate escape (\\ud800 to \\udfff)."]}`},
		{"body not an object", []int{1}, `{"body":["JSON parse error - expected a JSON object"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := `{"code":400001,"message":"Validation Error.","detail":` + tc.detail + `}`
			expectJSON(t, c.Post(devicesPath, tc.body), 400, want)
		})
	}
	// nothing was written by any failed request
	if n := sqlCount(t, `SELECT count(*) FROM devices WHERE account_id = ?`, accountIDOf(t, tok)); n != 0 {
		t.Fatalf("%d devices written by invalid requests", n)
	}
}

func TestDeviceAcceptedProperties(t *testing.T) {
	c, _ := freshClient(t)
	colors := []string{"#fff", "#A0b1C2", "rgb(0,0,0)", "rgb( 255 , 255 , 255 )", "rgba(10,20,30,0)", "rgba(10,20,30,1)", "rgba(10,20,30,0.25)", "rgba(10,20,30,.5)"}
	for i, col := range colors {
		d := createDevice(t, c, map[string]any{"label": fmt.Sprintf("c%d", i), "properties": map[string]any{"_color": col}})
		if got := jsonString(d, "properties", "_color"); got != col {
			t.Errorf("_color %q stored as %q", col, got)
		}
	}
	for i, typ := range []string{"manual", "specified", "auto"} {
		createDevice(t, c, map[string]any{"label": fmt.Sprintf("l%d", i), "properties": map[string]any{"_location_type": typ}})
	}
	for i, typ := range []string{"boolean", "date", "list", "text", "number"} {
		createDevice(t, c, map[string]any{"label": fmt.Sprintf("t%d", i), "properties": map[string]any{"_config": map[string]any{"k": map[string]any{"type": typ}}}})
	}
	// a null attribute on create is simply not stored
	d := createDevice(t, c, map[string]any{"label": "nulls", "properties": map[string]any{"_icon": nil, "_color": "#000"}})
	expectJSON(t, c.Get(devicesPath+"/"+jsonString(d, "id")), 200, mustJSON(t, withField(d, "properties", map[string]any{"_color": "#000"})))
}

func TestDevicePatch(t *testing.T) {
	c, tok := freshClient(t)
	org := insertOrganization(t, tok, "acme", "Acme")
	d := createDevice(t, c, map[string]any{"label": "kitchen", "name": "Kitchen", "description": "d0", "tags": []string{"a"},
		"properties": map[string]any{"_icon": "home", "_color": "#fff", "_location_type": "auto"}})
	path := devicesPath + "/" + jsonString(d, "id")
	steps := []struct {
		name  string
		patch map[string]any
		check map[string]any // fields expected after the step
	}{
		{"name only", map[string]any{"name": "Cocina"},
			map[string]any{"name": "Cocina", "label": "kitchen", "description": "d0", "tags": []any{"a"}}},
		{"properties merge", map[string]any{"properties": map[string]any{"_color": "#000", "_location_type": "manual", "_location_fixed": map[string]any{"lat": 10, "lng": 20}}},
			map[string]any{"properties": map[string]any{"_icon": "home", "_color": "#000", "_location_type": "manual", "_location_fixed": map[string]any{"lat": 10.0, "lng": 20.0}},
				"position": map[string]any{"lat": 10.0, "lng": 20.0}}},
		{"null removes an attribute", map[string]any{"properties": map[string]any{"_icon": nil}},
			map[string]any{"properties": map[string]any{"_color": "#000", "_location_type": "manual", "_location_fixed": map[string]any{"lat": 10.0, "lng": 20.0}}}},
		{"empty properties change nothing", map[string]any{"properties": map[string]any{}},
			map[string]any{"properties": map[string]any{"_color": "#000", "_location_type": "manual", "_location_fixed": map[string]any{"lat": 10.0, "lng": 20.0}}}},
		{"label keeps name", map[string]any{"label": "Galley"}, map[string]any{"label": "galley", "name": "Cocina"}},
		{"description, tags, isActive", map[string]any{"description": "", "tags": []string{}, "isActive": false},
			map[string]any{"description": "", "tags": []any{}, "isActive": false}},
		{"organization by label", map[string]any{"organization": "~acme"}, map[string]any{"organization": map[string]any{
			"id": org, "label": "acme", "name": "Acme", "url": c.URL + "/api/v2.0/organizations/" + org}}},
		{"organization null", map[string]any{"organization": nil}, map[string]any{"organization": nil}},
		{"read-only fields ignored", map[string]any{"id": "x", "createdAt": "y", "variablesNumber": 9}, map[string]any{"variablesNumber": 0.0, "id": jsonString(d, "id")}},
	}
	for _, st := range steps {
		body := expectStatus(t, c.Patch(path, st.patch), 200)
		for k, want := range st.check {
			if !reflect.DeepEqual(body[k], want) {
				t.Fatalf("%s: %s = %v, want %v", st.name, k, body[k], want)
			}
		}
		if !reflect.DeepEqual(body, expectStatus(t, c.Get(path), 200)) {
			t.Fatalf("%s: PATCH answer differs from GET", st.name)
		}
	}
	// an invalid PATCH writes nothing, not even its valid fields
	before := c.Get(path)
	expectJSON(t, c.Patch(path, map[string]any{"name": "changed", "properties": map[string]any{"_colour": 1}}), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"properties._colour":["Unknown attribute; allowed: _icon, _color, _location_type, _location_variable, _location_fixed, _config."]}}`)
	if after := c.Get(path); string(after.Body) != string(before.Body) {
		t.Fatalf("invalid PATCH changed the device:\n%s\n%s", before.Body, after.Body)
	}
	// merged properties over 16 KiB are refused
	big := strings.Repeat("x", 9000)
	expectStatus(t, c.Patch(path, map[string]any{"properties": map[string]any{"_icon": big}}), 200)
	expectJSON(t, c.Patch(path, map[string]any{"properties": map[string]any{"_config": map[string]any{"k": map[string]any{"text": big}}}}), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"properties":["Ensure this object is at most 16384 bytes serialized."]}}`)
	// a body that is not JSON
	expectJSON(t, c.Do("PATCH", path, "{"), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"body":["JSON parse error - unexpected end of JSON input at offset 1"]}}`)
}

func TestDevicePut(t *testing.T) {
	c, _ := freshClient(t)
	d := createDevice(t, c, map[string]any{"label": "a", "properties": map[string]any{"_icon": "x"}})
	path := devicesPath + "/" + jsonString(d, "id")
	expectJSON(t, c.Do("PUT", path, map[string]any{"name": "n"}), 400,
		`{"code":400001,"message":"Validation Error.","detail":{"label":["This field is required."]}}`)
	got := expectStatus(t, c.Do("PUT", path+"/", map[string]any{"label": "B", "name": "Bee", "properties": map[string]any{"_color": "#123"}}), 200)
	if got["label"] != "b" || got["name"] != "Bee" || !reflect.DeepEqual(got["properties"], map[string]any{"_icon": "x", "_color": "#123"}) {
		t.Fatalf("PUT result %v", got)
	}
}

func TestDeviceDuplicateLabel(t *testing.T) {
	c, _ := freshClient(t)
	dup := `{"code":400001,"message":"Validation Error.","detail":{"label":["A device with this label already exists."]}}`
	createDevice(t, c, map[string]any{"label": "kitchen"})
	b := createDevice(t, c, map[string]any{"label": "hall"})
	expectJSON(t, c.Post(devicesPath, map[string]any{"label": "KITCHEN"}), 400, dup)
	expectJSON(t, c.Patch(devicesPath+"/"+jsonString(b, "id"), map[string]any{"label": "kitchen"}), 400, dup)
	expectJSON(t, c.Do("PUT", devicesPath+"/~hall", map[string]any{"label": "kitchen"}), 400, dup)
	// same label, another account
	other, _ := freshClient(t)
	createDevice(t, other, map[string]any{"label": "kitchen"})
	// concurrent creates of one label: exactly one wins, the others get the 400
	results := make(chan int, 8)
	for i := 0; i < 8; i++ {
		go func() { results <- c.Post(devicesPath, map[string]any{"label": "race"}).Status }()
	}
	created := 0
	for i := 0; i < 8; i++ {
		switch s := <-results; s {
		case 201:
			created++
		case 400:
		default:
			t.Errorf("status %d", s)
		}
	}
	if created != 1 {
		t.Fatalf("%d concurrent creates succeeded", created)
	}
}

func TestDeviceDelete(t *testing.T) {
	c, tok := freshClient(t)
	gone := env.Seed(t, tok, "gone", "temp", []testenv.Point{{TS: 1000, Value: 1}, {TS: 2000, Value: 2}})
	env.Seed(t, tok, "gone", "hum", []testenv.Point{{TS: 1000, Value: 1}})
	kept := env.Seed(t, tok, "kept", "temp", []testenv.Point{{TS: 1000, Value: 1}})
	if got := expectStatus(t, c.Get(devicesPath+"/~gone"), 200)["variablesNumber"]; got != 2.0 {
		t.Fatalf("variablesNumber %v", got)
	}
	expectStatus(t, c.Delete(devicesPath+"/~gone/"), 204)
	expectJSON(t, c.Get(devicesPath+"/"+gone.DeviceID), 404, `{"code":404001,"message":"Not found.","detail":"Device '`+gone.DeviceID+`' was not found."}`)
	expectJSON(t, c.Get("/api/v2.0/variables/"+gone.VariableID), 404, `{"code":404001,"message":"Not found.","detail":"Variable '`+gone.VariableID+`' was not found."}`)
	expectJSON(t, c.Delete(devicesPath+"/~gone"), 404, `{"code":404001,"message":"Not found.","detail":"Device '~gone' was not found."}`)
	if n := sqlCount(t, `SELECT count(*) FROM variables WHERE device_id = ?`, gone.DeviceKey); n != 0 {
		t.Fatalf("%d variables left", n)
	}
	if n := sqlCount(t, `SELECT count(*) FROM "values" WHERE variable_id IN (SELECT id FROM variables WHERE device_id = ?) OR variable_id = ?`, gone.DeviceKey, gone.VariableKey); n != 0 {
		t.Fatalf("%d values left", n)
	}
	if n := sqlCount(t, `SELECT count(*) FROM "values" WHERE variable_id = ?`, kept.VariableKey); n != 1 {
		t.Fatalf("the other device lost values: %d", n)
	}
	expectStatus(t, c.Get(devicesPath+"/~kept"), 200)
}

func TestDeviceVariablesNumber(t *testing.T) {
	c, _ := freshClient(t)
	createDevice(t, c, map[string]any{"label": "d"})
	for _, l := range []string{"a", "b", "c"} {
		expectStatus(t, c.Post(devicesPath+"/~d/variables", map[string]any{"label": l}), 201)
	}
	expectStatus(t, c.Delete(devicesPath+"/~d/variables/~b"), 204)
	list := expectStatus(t, c.Get(devicesPath+"?label=d"), 200)
	if got := jsonField(list["results"].([]any)[0].(map[string]any), "variablesNumber"); got != 2.0 {
		t.Fatalf("variablesNumber %v", got)
	}
}

func TestDeviceListFilters(t *testing.T) {
	c, tok := freshClient(t)
	org := insertOrganization(t, tok, "acme", "Acme")
	insertOrganization(t, tok, "other", "Other")
	ids := map[string]string{}
	for _, d := range []map[string]any{
		{"label": "alpha", "name": "Kitchen sensor", "tags": []string{"x", "y"}, "organization": "~acme"},
		{"label": "beta", "name": "Hall", "tags": []string{"x"}, "isActive": false, "organization": "~other"},
		{"label": "gamma", "name": "Garage", "tags": []string{"y", "z"}},
		{"label": "tmp-delta", "name": "KITCHEN two", "isActive": false, "organization": "~acme"},
	} {
		ids[d["label"].(string)] = jsonString(createDevice(t, c, d), "id")
		time.Sleep(2 * time.Millisecond) // distinct createdAt for the default order
	}
	v := expectStatus(t, c.Post(devicesPath+"/~gamma/variables", map[string]any{"label": "t"}), 201)
	v2 := expectStatus(t, c.Post(devicesPath+"/~beta/variables", map[string]any{"label": "t"}), 201)
	// another account's device never shows
	other, _ := freshClient(t)
	createDevice(t, other, map[string]any{"label": "alpha", "name": "Kitchen"})

	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"tmp-delta", "gamma", "beta", "alpha"}},
		{"id=" + ids["beta"], []string{"beta"}},
		{"id=nothex", []string{}},
		{"id__in=" + ids["alpha"] + "," + ids["gamma"] + ",bogus", []string{"gamma", "alpha"}}, // each item stands alone (API.md §3)
		{"id__in=" + ids["alpha"] + "," + ids["gamma"], []string{"gamma", "alpha"}},
		{"id!=" + ids["alpha"], []string{"tmp-delta", "gamma", "beta"}},
		{"label=beta", []string{"beta"}},
		{"label=BETA", []string{}},
		{"label__iexact=BETA", []string{"beta"}},
		{"label__in=alpha,beta,nope", []string{"beta", "alpha"}},
		{"label__startswith!=tmp", []string{"gamma", "beta", "alpha"}},
		{"isActive=false", []string{"tmp-delta", "beta"}},
		{"isActive=true", []string{"gamma", "alpha"}},
		{"isActive=maybe", []string{}},
		{"tags__contains=x", []string{"beta", "alpha"}},
		{"tags__contains=x,y", []string{"alpha"}},
		{"tags__contains=y", []string{"gamma", "alpha"}},
		{"organization__id=" + org, []string{"tmp-delta", "alpha"}},
		{"organization__label=other", []string{"beta"}},
		{"organization__isnull=true", []string{"gamma"}},
		{"variables__id__in=" + jsonString(v, "id") + "," + jsonString(v2, "id"), []string{"gamma", "beta"}},
		{"variables__id=" + jsonString(v, "id"), []string{"gamma"}},
		{"variables__label=t", []string{"gamma", "beta"}},
		{"variablesNumber__gte=1&sort_by=-variablesNumber", []string{"gamma", "beta"}},
		{"variablesNumber=0", []string{"tmp-delta", "alpha"}},
		{"search=kitchen", []string{"tmp-delta", "alpha"}},
		{"search=GAM", []string{"gamma"}},
		{"search=%25", []string{}},
		{"search=%00", []string{}},
		{"label=%00", []string{}},
		{"sort_by=label", []string{"alpha", "beta", "gamma", "tmp-delta"}},
		{"sort_by=-label", []string{"tmp-delta", "gamma", "beta", "alpha"}},
		{"sort_by=name", []string{"gamma", "beta", "tmp-delta", "alpha"}},
		{"sort_by=createdAt", []string{"alpha", "beta", "gamma", "tmp-delta"}},
		{"sort_by=nosuch", []string{"tmp-delta", "gamma", "beta", "alpha"}},
		{"isActive=false&organization__label=acme", []string{"tmp-delta"}},
		{"unknown=1&label__bogus=2", []string{"tmp-delta", "gamma", "beta", "alpha"}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			cl := c
			if tc.query == "isActive=maybe" { // malformed on purpose: it matches nothing
				cl = c.OffContract()
			}
			body := expectStatus(t, cl.Get(devicesPath+"/?"+tc.query), 200)
			if got := resultLabels(t, body); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("labels %v, want %v", got, tc.want)
			}
			if body["count"] != float64(len(tc.want)) {
				t.Fatalf("count %v, want %d", body["count"], len(tc.want))
			}
		})
	}
}

func TestDevicePagination(t *testing.T) {
	c, tok := freshClient(t)
	for i := 1; i <= 5; i++ {
		createDevice(t, c, map[string]any{"label": fmt.Sprintf("d%d", i), "tags": []string{"t"}})
	}
	base := c.URL + devicesPath
	cases := []struct {
		query          string
		labels         []string
		next, previous string // "" for null
		countWant      float64
	}{
		{"page_size=2&sort_by=label", []string{"d1", "d2"}, base + "?page=2&page_size=2&sort_by=label", "", 5},
		{"page_size=2&sort_by=label&page=2&tags__contains=t", []string{"d3", "d4"},
			base + "?page=3&page_size=2&sort_by=label&tags__contains=t", base + "?page=1&page_size=2&sort_by=label&tags__contains=t", 5},
		{"page_size=2&sort_by=label&page=3", []string{"d5"}, "", base + "?page=2&page_size=2&sort_by=label", 5},
		{"page_size=2&sort_by=label&page=9", []string{}, "", base + "?page=3&page_size=2&sort_by=label", 5},
		{"page_size=2&sort_by=label&page=2&token=" + url.QueryEscape(tok), []string{"d3", "d4"},
			base + "?page=3&page_size=2&sort_by=label", base + "?page=1&page_size=2&sort_by=label", 5},
		{"page_size=0&page=0&sort_by=label", []string{"d1", "d2", "d3", "d4", "d5"}, "", "", 5},
		{"page_size=x&page=y&sort_by=label", []string{"d1", "d2", "d3", "d4", "d5"}, "", "", 5},
		{"label=d9&page=2", []string{}, "", base + "?label=d9&page=1", 0},
		{"page=9223372036854775807&page_size=1000", []string{}, "", base + "?page=1&page_size=1000", 5},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			cl := c
			if strings.Contains(tc.query, "page=0") || strings.Contains(tc.query, "page=y") {
				cl = c.OffContract() // malformed on purpose: the default page applies
			}
			body := expectStatus(t, cl.Get(devicesPath+"?"+tc.query), 200)
			if got := resultLabels(t, body); !reflect.DeepEqual(got, tc.labels) {
				t.Fatalf("labels %v, want %v", got, tc.labels)
			}
			if body["count"] != tc.countWant {
				t.Fatalf("count %v", body["count"])
			}
			for name, want := range map[string]string{"next": tc.next, "previous": tc.previous} {
				var w any
				if want != "" {
					w = want
				}
				if body[name] != w {
					t.Fatalf("%s %v, want %v", name, body[name], w)
				}
			}
		})
	}
	// the token sent as a query parameter authenticates and never appears in links
	r := c.As("").Get(devicesPath + "?page_size=1&token=" + url.QueryEscape(tok))
	if body := expectStatus(t, r, 200); strings.Contains(string(r.Body), tok) || body["next"] != base+"?page=2&page_size=1" {
		t.Fatalf("token leaked or wrong next: %s", r.Body)
	}
}

func TestDevicePageSizeClamp(t *testing.T) {
	c, tok := freshClient(t)
	sqlExec(t, `INSERT INTO devices (account_id, label, name) SELECT ?, 'd' || i, 'd' || i FROM generate_series(1, 1001) AS i`, accountIDOf(t, tok))
	body := expectStatus(t, c.Get(devicesPath+"?page_size=5000"), 200)
	if n := len(body["results"].([]any)); n != 1000 || body["count"] != 1001.0 {
		t.Fatalf("%d results of %v", n, body["count"])
	}
	if body["next"] != c.URL+devicesPath+"?page=2&page_size=5000" {
		t.Fatalf("next %v", body["next"])
	}
	body = expectStatus(t, c.Get(devicesPath+"?page_size=5000&page=2"), 200)
	if n := len(body["results"].([]any)); n != 1 {
		t.Fatalf("page 2 has %d results", n)
	}
	if n := len(expectStatus(t, c.Get(devicesPath), 200)["results"].([]any)); n != 50 {
		t.Fatalf("default page size gave %d", n)
	}
}

func TestDeviceIsolation(t *testing.T) {
	c, _ := freshClient(t)
	other, _ := freshClient(t)
	theirs := createDevice(t, other, map[string]any{"label": "secret"})
	expectStatus(t, other.Post(devicesPath+"/~secret/variables", map[string]any{"label": "v"}), 201)
	id := jsonString(theirs, "id")
	notFound := func(key string) string {
		return `{"code":404001,"message":"Not found.","detail":"Device '` + key + `' was not found."}`
	}
	for _, key := range []string{id, "~secret"} {
		p := devicesPath + "/" + key
		cases := []struct {
			method, path string
			body         any
		}{
			{"GET", p, nil},
			{"PATCH", p, map[string]any{"name": "mine"}},
			{"PUT", p, map[string]any{"label": "mine"}},
			{"DELETE", p, nil},
			{"GET", p + "/variables", nil},
			{"POST", p + "/variables", map[string]any{"label": "w"}},
			{"GET", p + "/variables/~v", nil},
			{"PATCH", p + "/variables/~v", map[string]any{"name": "x"}},
			{"DELETE", p + "/variables/~v", nil},
		}
		for _, tc := range cases {
			expectJSON(t, c.Do(tc.method, tc.path, tc.body), 404, notFound(key))
		}
	}
	// unknown and malformed keys
	for _, key := range []string{"~nope", "0123456789abcdef01234567", "not-an-id", "~bad label"} {
		expectJSON(t, c.Get(devicesPath+"/"+url.PathEscape(key)), 404, notFound(key))
	}
	for _, q := range []string{"", "?id=" + id, "?label=secret", "?search=secret"} {
		if body := expectStatus(t, c.Get(devicesPath+q), 200); body["count"] != 0.0 {
			t.Fatalf("%s: another account's device listed: %v", q, body)
		}
	}
	// the device is untouched
	after := expectStatus(t, other.Get(devicesPath+"/"+id), 200)
	if after["name"] != "secret" || after["variablesNumber"] != 1.0 {
		t.Fatalf("other account's device changed: %v", after)
	}
}

// withField is a copy of m with k set to v.
func withField(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

func TestDeviceRoutesNeedCredentials(t *testing.T) {
	anon := env.Client(t).As("")
	for _, tc := range []struct{ method, path string }{
		{"GET", devicesPath}, {"POST", devicesPath}, {"GET", devicesPath + "/~a"}, {"PATCH", devicesPath + "/~a"},
		{"PUT", devicesPath + "/~a"}, {"DELETE", devicesPath + "/~a"}, {"GET", devicesPath + "/~a/variables"},
		{"POST", devicesPath + "/~a/variables"}, {"GET", devicesPath + "/~a/variables/~v"}, {"GET", variablesPath},
		{"GET", variablesPath + "/0123456789abcdef01234567"}, {"DELETE", variablesPath + "/0123456789abcdef01234567"},
	} {
		expectJSON(t, anon.Do(tc.method, tc.path, map[string]any{"label": "a"}), 401, body401001)
	}
}

// BenchmarkListDevices measures E5 over 100k devices of one account (plus 10k of
// another, which must not slow it down): the default page 1, and a filtered, sorted
// later page.
func BenchmarkListDevices(b *testing.B) {
	c, tok := freshClient(b)
	sqlExec(b, `INSERT INTO devices (account_id, label, name, is_active, tags, created_at)
		SELECT ?, 'dev-' || i, 'Device ' || i, i % 10 <> 0, ARRAY['t' || (i % 100)],
			now() - i * interval '1 second'
		FROM generate_series(1, 100000) AS i`, accountIDOf(b, tok))
	sqlExec(b, `INSERT INTO devices (account_id, label, name)
		SELECT ?, 'dev-' || i, 'Device ' || i FROM generate_series(1, 10000) AS i`, accountIDOf(b, env.NewAccount(b)))
	sqlExec(b, `ANALYZE devices`)
	cases := []struct{ name, query string }{
		{"page1", ""},
		{"page1_size1000", "?page_size=1000"},
		{"filtered", "?isActive=false&tags__contains=t40&sort_by=label&page=3&page_size=20"},
		{"id_in", "?id__in=0123456789abcdef01234567,abcdefabcdefabcdefabcdef"},
		{"search", "?search=dev-4242"},
		{"sorted_by_name", "?sort_by=-name"},
		{"deep_page", "?page=1000&page_size=100"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if r := c.Get(devicesPath + tc.query); r.Status != 200 {
					b.Fatalf("status %d: %s", r.Status, r.Body)
				}
			}
		})
	}
}

// freshClient is a client of a new account, so counts and labels of one test never
// see another test's rows.
func freshClient(t testing.TB) (*testenv.Client, string) {
	t.Helper()
	tok := env.NewAccount(t)
	return env.Client(t).As(tok), tok
}

// accountID is the internal id of the account holding token.
func accountIDOf(t testing.TB, token string) int64 {
	t.Helper()
	var id int64
	err := env.DB.NewRaw(`SELECT account_id FROM tokens WHERE hash = sha256(convert_to(?, 'UTF8'))`, token).
		Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("account of token: %v", err)
	}
	return id
}

// exec runs SQL straight on the test database (fixtures the API does not own).
func sqlExec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := env.DB.NewRaw(query, args...).Exec(context.Background()); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count runs a count query on the test database.
func sqlCount(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.DB.NewRaw(query, args...).Scan(context.Background(), &n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// newOrganization inserts an Organization of the token's account and returns its id.
func insertOrganization(t *testing.T, token, label, name string) string {
	t.Helper()
	var id string
	err := env.DB.NewRaw(`INSERT INTO organizations (account_id, label, name) VALUES (?, ?, ?) RETURNING public_id`,
		accountIDOf(t, token), label, name).Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("insert organization: %v", err)
	}
	return id
}

// expect asserts the status and returns the body as an object.
func expectStatus(t testing.TB, r testenv.Response, status int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if status == 204 {
		return nil
	}
	return r.Object(t)
}

// expectJSON asserts the status and that the body equals want as JSON.
func expectJSON(t *testing.T, r testenv.Response, status int, want string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var got, exp any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("body is not JSON: %s", r.Body)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("want is not JSON: %s", want)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("body\n got %s\nwant %s", r.Body, want)
	}
}

// labels are the labels of a list body's results, in order.
func resultLabels(t *testing.T, body map[string]any) []string {
	t.Helper()
	out := []string{}
	for _, r := range body["results"].([]any) {
		out = append(out, r.(map[string]any)["label"].(string))
	}
	return out
}

// field reads a nested field of a decoded body: jsonField(m, "organization", "id").
func jsonField(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[p]
	}
	return v
}

func jsonString(m map[string]any, path ...string) string {
	s, _ := jsonField(m, path...).(string)
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
