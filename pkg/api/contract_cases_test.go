package api_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// contractFixture is what the contract's requests name, in an account of its own.
type contractFixture struct {
	full        string // the account's token
	otherDevice string // a device token of Device "other"
	user        string // a username of this run (usernames are unique across accounts)
	varID       string // Variable "t" of Device "own"
	offVarID    string // Variable "t" of the disabled Device "off"
	doomedVarID string // Variable "doomed" of Device "own", to delete
	tokenID     string // an account token to delete
	devTokenID  string // a device token of "own", to delete
}

// newContractFixture makes a fresh account with Devices "own" (Variables "t" with
// values, "doomed"), "other" and "off" (disabled), and tokens to delete.
func newContractFixture(t *testing.T, server *testenv.Client) contractFixture {
	t.Helper()
	f := contractFixture{full: env.NewAccount(t), user: "contract-" + randomSuffix(t)}
	c := server.As(f.full)
	for _, w := range []struct {
		path string
		body any
	}{
		{"/api/v1.6/devices/own/", map[string]any{"t": []any{map[string]any{"value": 1, "timestamp": 1000},
			map[string]any{"value": 2, "timestamp": 2000}}, "doomed": 1}},
		{"/api/v1.6/devices/other/", map[string]any{"t": 1}},
		{"/api/v1.6/devices/off/", map[string]any{"t": 1}},
	} {
		mustStatus(t, c.Post(w.path, w.body), 200)
	}
	mustStatus(t, c.Patch("/api/v2.0/devices/~off/", map[string]any{"isActive": false}), 200)
	f.varID = idOf(t, c.Get("/api/v2.0/devices/~own/variables/~t/"))
	f.offVarID = idOf(t, c.Get("/api/v2.0/devices/~off/variables/~t/"))
	f.doomedVarID = idOf(t, c.Get("/api/v2.0/devices/~own/variables/~doomed/"))
	f.otherDevice = c.NewToken("/api/v2.0/devices/~other/tokens/", map[string]any{"label": "firmware"})
	f.tokenID = idOf(t, c.Post("/api/v2.0/tokens/", map[string]any{"label": "doomed"}))
	f.devTokenID = idOf(t, c.Post("/api/v2.0/devices/~own/tokens/", map[string]any{"label": "doomed"}))
	return f
}

func mustStatus(t *testing.T, r testenv.Response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

func idOf(t *testing.T, r testenv.Response) string {
	t.Helper()
	id, _ := r.Object(t)["id"].(string)
	if id == "" {
		t.Fatalf("no id in %d %s", r.Status, r.Body)
	}
	return id
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Keys that name nothing.
const (
	noKey = "~nobody"
	noID  = "000000000000000000000000"
)

// contractCases are the contract's requests, in the order they run: creations, reads
// and updates first, deletions of what they created last.
func contractCases(f contractFixture) []contractCase {
	own := map[string]string{"device": "~own"}
	ownT := map[string]string{"device": "~own", "variable": "~t"}
	v16 := map[string]string{"device": "own", "variable": "t"}
	v16Off := map[string]string{"device": "off", "variable": "t"}
	variable := map[string]string{"variable": f.varID}
	id := map[string]string{"id": f.varID}
	user := map[string]string{"key": "~" + f.user}
	acme := map[string]string{"key": "~acme"}
	event := map[string]string{"event": "~hot"}
	csvType, ndjsonType := []string{"Content-Type", "text/csv"}, []string{"Content-Type", "application/x-ndjson"}
	stat := map[string]string{"id": f.varID, "agg": "mean", "start": "0", "end": "9999999999999"}
	condition := map[string]any{"variable": "own.t", "operator": ">", "value": 80}
	actions := []any{map[string]any{"type": "mqtt", "topic": "/v1.6/devices/own/alarm", "payload": "1"}}
	userBody := map[string]any{"username": f.user, "email": f.user + "@example.com"}
	return []contractCase{
		{op: "healthz", want: 200},
		{op: "readyz", want: 200},
		{op: "metrics", want: 200},
		{op: "openapi", want: 200},
		{op: "console", want: 200},
		{op: "consoleFile", params: map[string]string{"path": "app.js"}, want: 200,
			missing: map[string]string{"path": "nothing.js"}},
		{op: "getAccount", want: 200},
		{op: "getAccount", want: 200, upstream: "limited"},
		{op: "getAccount", want: 429, upstream: "limited"},

		{op: "createOrganization", body: map[string]any{"label": "acme", "name": "ACME"}, want: 201},
		{op: "listOrganizations", query: "label=acme", want: 200},
		{op: "getOrganization", params: acme, want: 200, missing: map[string]string{"key": noKey}},
		{op: "patchOrganization", params: acme, body: map[string]any{"description": "A customer."}, want: 200,
			missing: map[string]string{"key": noKey}},
		{op: "putOrganization", params: acme, body: map[string]any{"label": "acme", "name": "ACME Corp."}, want: 200},
		{op: "listRoles", want: 200},
		{op: "getRole", params: map[string]string{"key": "~editor"}, want: 200, missing: map[string]string{"key": noKey}},

		{op: "createUser", body: map[string]any{"username": f.user, "email": f.user + "@example.com",
			"password": "correct-horse"}, want: 200},
		{op: "listUsers", query: "username=" + f.user, want: 200},
		{op: "getUser", params: user, want: 200, missing: map[string]string{"key": noKey}},
		{op: "patchUser", params: user, body: map[string]any{"firstName": "Ada"}, want: 200},
		{op: "putUser", params: user, body: userBody, want: 200},
		{op: "assignOrganizations", params: user, body: []any{map[string]any{"label": "acme", "role": "editor"}}, want: 200,
			missing: map[string]string{"key": noKey}},
		{op: "removeOrganizations", params: user, body: []any{map[string]any{"label": "acme"}}, want: 200},

		{op: "createDevice", body: map[string]any{"label": "fresh", "tags": []any{"contract"},
			"properties": map[string]any{"_color": "#ff0000"}}, want: 201},
		{op: "createDevices", body: []any{map[string]any{"label": "bulk-a"}, map[string]any{"label": "bulk-b", "isActive": false}},
			want: 201},
		{op: "createDevices", body: []any{map[string]any{"label": "bulk-c"}, map[string]any{"label": "Bad Label"}}, want: 400},
		{op: "listDevices", query: "label=own", want: 200},
		{op: "getDevice", params: own, want: 200, missing: map[string]string{"device": noKey}},
		{op: "patchDevice", params: own, body: map[string]any{"description": "Contract.",
			"properties": map[string]any{"_location_type": nil}}, want: 200},
		{op: "putDevice", params: own, body: map[string]any{"label": "own", "name": "Own"}, want: 200},

		{op: "createVariable", params: own, body: map[string]any{"label": "fresh", "unit": "°C"}, want: 201,
			missing: map[string]string{"device": noKey}},
		{op: "listDeviceVariables", params: own, want: 200, missing: map[string]string{"device": noKey}},
		{op: "listVariables", query: "label=t", want: 200},
		{op: "getDeviceVariable", params: ownT, want: 200, missing: map[string]string{"variable": noKey}},
		{op: "patchDeviceVariable", params: ownT, body: map[string]any{"unit": "°F"}, want: 200},
		{op: "putDeviceVariable", params: ownT, body: map[string]any{"label": "t", "unit": "°C"}, want: 200},
		{op: "getVariable", params: variable, want: 200, missing: map[string]string{"variable": noID}},
		{op: "getVariable", params: variable, query: "explain=sql", want: 400}, // a raw Variable
		{op: "patchVariable", params: variable, body: map[string]any{"description": "Contract."}, want: 200},
		{op: "putVariable", params: variable, body: map[string]any{"label": "t"}, want: 200},

		{op: "listTokens", want: 200},
		{op: "createToken", body: map[string]any{"label": "dashboard", "scope": "read"}, want: 201},
		{op: "listDeviceTokens", params: own, want: 200, missing: map[string]string{"device": noKey}},
		{op: "createDeviceToken", params: own, body: map[string]any{"label": "firmware"}, want: 201},

		{op: "createEvent", body: map[string]any{"label": "hot", "condition": condition, "actions": actions}, want: 201},
		{op: "listEvents", want: 200},
		{op: "getEvent", params: event, want: 200, missing: map[string]string{"event": noKey}},
		{op: "patchEvent", params: event, body: map[string]any{"isActive": false}, want: 200},
		{op: "putEvent", params: event, body: map[string]any{"label": "hot", "condition": condition,
			"actions": actions}, want: 200},
		{op: "listEventDeliveries", params: event, want: 200, missing: map[string]string{"event": noKey}},

		{op: "postDeviceValues", params: map[string]string{"device": "own"}, body: map[string]any{
			"t": []any{map[string]any{"value": 3, "timestamp": 3000}}, "h": 40}, want: 200},
		{op: "postDeviceValues", params: map[string]string{"device": "off"}, body: map[string]any{"t": 1}, want: 423},
		{op: "postDeviceVariableValues", params: v16, body: map[string]any{"value": 4, "timestamp": 4000}, want: 201},
		{op: "postDeviceVariableValues", params: v16Off, body: 1, want: 423},
		{op: "getDeviceVariableValues", params: v16, query: "start=0&end=9999999999999", want: 200,
			missing: map[string]string{"device": "nobody"}},
		{op: "getLastValue", params: v16, want: 200, missing: map[string]string{"device": "nobody"}},
		{op: "postVariableValues", params: id, body: []any{map[string]any{"value": 5, "timestamp": 5000}, 6}, want: 201,
			missing: map[string]string{"id": noID}},
		{op: "postVariableValues", params: map[string]string{"id": f.offVarID}, body: 1, want: 423},
		{op: "getVariableValues", params: id, query: "page_size=2", want: 200, missing: map[string]string{"id": noID}},
		{op: "getVariableValues", params: id, query: "format=csv&timestamp_format=iso&tz=Europe/Berlin", want: 200},
		{op: "getStatistic", params: stat, want: 200, missing: map[string]string{"id": noID}},
		{op: "postCollection", body: []any{map[string]any{"variable": f.varID, "value": 7, "timestamp": 7000}}, want: 201},
		{op: "postCollection", body: []any{map[string]any{"variable": f.offVarID, "value": 1}}, want: 423},
		{op: "importVariableValues", params: id, body: "timestamp,value\n8000,8\n", header: csvType, want: 200,
			missing: map[string]string{"id": noID}},
		{op: "importVariableValues", params: map[string]string{"id": f.offVarID}, body: "value\n1\n", header: csvType, want: 423},
		{op: "importDeviceVariableValues", params: v16, body: `{"timestamp": 9000, "value": 9}` + "\n", header: ndjsonType, want: 200},
		{op: "importDeviceVariableValues", params: v16Off, body: "value\n1\n", header: csvType, want: 423},
		{op: "importCollection", body: "device,variable,timestamp,value\nown,t,10000,10\n", header: csvType, want: 200},
		{op: "importCollection", body: "device,variable,value\noff,t,1\n", header: csvType, want: 423},
		{op: "deleteValues", params: map[string]string{"id": f.varID, "start": "0", "end": "1500"}, want: 204,
			missing: map[string]string{"id": noID}},
		{op: "deleteValues", params: map[string]string{"id": f.varID, "start": "1500", "end": "0"}, want: 400},
		{op: "statistics", body: map[string]any{"start": 0, "end": 9999999999999, "aggregations": []any{"mean", "max"},
			"variables": []any{map[string]any{"variable": "~t", "device": "~own"}}}, want: 200},
		{op: "resample", body: map[string]any{"variables": []any{f.varID}, "aggregation": "mean", "period": "1H",
			"start": 0, "end": 9999999999999}, want: 200},
		{op: "resample", body: map[string]any{"variables": []any{f.varID}, "aggregation": "mean", "period": "1X"}, want: 400},
		{op: "aggregation", body: map[string]any{"variables": []any{f.varID}, "aggregation": "max"}, want: 200},

		// deletions, of what the cases above created
		{op: "deleteToken", params: map[string]string{"id": f.tokenID}, want: 204, missing: map[string]string{"id": noID}},
		{op: "deleteDeviceToken", params: map[string]string{"device": "~own", "id": f.devTokenID}, want: 204,
			missing: map[string]string{"id": noID}},
		{op: "deleteEvent", params: event, want: 204, missing: map[string]string{"event": noKey}},
		{op: "deleteDeviceVariable", params: map[string]string{"device": "~own", "variable": "~fresh"}, want: 204,
			missing: map[string]string{"variable": noKey}},
		{op: "deleteVariable", params: map[string]string{"variable": f.doomedVarID}, want: 204,
			missing: map[string]string{"variable": noID}},
		{op: "deleteDevice", params: map[string]string{"device": "~fresh"}, want: 204,
			missing: map[string]string{"device": noKey}},
		{op: "deleteUser", params: user, want: 204, missing: map[string]string{"key": noKey}},
		{op: "deleteOrganization", params: acme, want: 204, missing: map[string]string{"key": noKey}},
	}
}
