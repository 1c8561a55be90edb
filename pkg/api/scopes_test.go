package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// scoped is an account with a device of its own, another device, and one token of
// each kind (API.md §13).
type scoped struct {
	full, read, device, otherDevice *testenv.Client
	varID                           string // public id of own/t
	otherVarID                      string // public id of other/t
}

// newScoped creates the account, the devices (own and other, each with variable t)
// and the read and device tokens through the token routes.
func newScoped(t *testing.T, c *testenv.Client) scoped {
	t.Helper()
	s := scoped{full: c.As(env.NewAccount(t))}
	for _, d := range []string{"own", "other"} {
		if r := s.full.Post("/api/v1.6/devices/"+d+"/", map[string]any{"t": map[string]any{"value": 1, "timestamp": 500}}); r.Status != 200 {
			t.Fatalf("create %s: %d %s", d, r.Status, r.Body)
		}
	}
	s.varID = s.full.Get("/api/v2.0/devices/~own/variables/~t/").Object(t)["id"].(string)
	s.otherVarID = s.full.Get("/api/v2.0/devices/~other/variables/~t/").Object(t)["id"].(string)
	s.read = s.full.As(s.full.NewToken("/api/v2.0/tokens/", map[string]any{"label": "dash", "scope": "read"}))
	s.device = s.full.As(s.full.NewToken("/api/v2.0/devices/~own/tokens/", map[string]any{"label": "fw"}))
	s.otherDevice = s.full.As(s.full.NewToken("/api/v2.0/devices/~other/tokens/", map[string]any{"label": "fw2"}))
	return s
}

// operation is one method on one path of the OpenAPI document.
type operation struct{ method, path string }

// servedOperations lists every operation of the served OpenAPI document under /api/.
func servedOperations(t *testing.T, c *testenv.Client) []operation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(c.Get("/openapi.json").Body, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []operation
	for path, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "post", "put", "patch", "delete":
				if strings.HasPrefix(path, "/api/") {
					ops = append(ops, operation{strings.ToUpper(m), path})
				}
			}
		}
	}
	// destructive operations last: a full token's DELETE of the device would remove
	// the device tokens the other rows use
	sort.Slice(ops, func(i, j int) bool {
		if (ops[i].method == "DELETE") != (ops[j].method == "DELETE") {
			return ops[j].method == "DELETE"
		}
		return ops[i].method+ops[i].path < ops[j].method+ops[j].path
	})
	return ops
}

// deviceRoutes are the operations a device token may use on its own device (API.md
// §13: the v1.6 value routes of that device: post and read values, lv, statistics).
// Written out here, apart from the server's table, so that the two check each other.
var deviceRoutes = map[operation]bool{
	{"POST", "/api/v1.6/devices/{device}/"}:                            true,
	{"POST", "/api/v1.6/devices/{device}/{variable}/values"}:           true,
	{"GET", "/api/v1.6/devices/{device}/{variable}/values"}:            true,
	{"GET", "/api/v1.6/devices/{device}/{variable}/lv"}:                true,
	{"POST", "/api/v1.6/variables/{id}/values"}:                        true,
	{"GET", "/api/v1.6/variables/{id}/values"}:                         true,
	{"GET", "/api/v1.6/variables/{id}/statistics/{agg}/{start}/{end}"}: true,
	{"POST", "/api/v1.6/devices/{device}/{variable}/values/import"}:    true,
	{"POST", "/api/v1.6/variables/{id}/values/import"}:                 true,
}

// analytics are the POSTs a read token may use: they only read.
var analytics = map[string]bool{
	"/api/v2.0/data/statistics/": true, "/api/v1.6/data/stats/resample/": true, "/api/v1.6/data/stats/aggregation/": true,
}

// fill puts the account's own device and variable (or harmless unknown keys) into a
// path template.
func (s scoped) fill(path string) string {
	v16 := strings.HasPrefix(path, "/api/v1.6/")
	dev, variable := "~own", "~t"
	if v16 {
		dev, variable = "own", "t"
	}
	id := s.varID
	if strings.Contains(path, "/tokens/") {
		id = "ffffffffffffffffffffffff" // no such token: a full token's DELETE finds nothing
	}
	return strings.NewReplacer("{device}", dev, "{variable}", variable, "{id}", id, "{key}", "~nobody",
		"{agg}", "mean", "{start}", "0", "{end}", "1000").Replace(path)
}

// TestScopeMatrix: every operation of the served OpenAPI document × {full, read,
// device token of the device, device token of another device} → allowed or 403001.
// The list comes from the document, so a new route cannot be forgotten.
func TestScopeMatrix(t *testing.T) {
	s := newScoped(t, env.Client(t))
	ops := servedOperations(t, s.full)
	if len(ops) < 40 {
		t.Fatalf("only %d operations in the document", len(ops))
	}
	for _, who := range []struct {
		name    string
		c       *testenv.Client
		allowed func(operation) bool
	}{
		{"other device's token", s.otherDevice, func(operation) bool { return false }},
		{"device token", s.device, func(o operation) bool { return deviceRoutes[o] }},
		{"read token", s.read, func(o operation) bool {
			return (o.method == "GET" || analytics[o.path]) && !strings.Contains(o.path, "/tokens") // tokens: full only
		}},
		{"full token", s.full, func(operation) bool { return true }},
	} {
		for _, op := range ops {
			var body any
			if op.method != "GET" && op.method != "DELETE" {
				body = map[string]any{}
			}
			r := who.c.OffContract().Do(op.method, s.fill(op.path), body)
			forbidden := r.Status == http.StatusForbidden && strings.Contains(string(r.Body), `"code":403001`)
			switch {
			case r.Status == http.StatusUnauthorized:
				t.Errorf("%s: %s %s: 401 %s", who.name, op.method, op.path, r.Body)
			case who.allowed(op) && r.Status == http.StatusForbidden:
				t.Errorf("%s: %s %s: 403, want it allowed", who.name, op.method, op.path)
			case !who.allowed(op) && !forbidden:
				t.Errorf("%s: %s %s: %d %s, want 403001", who.name, op.method, op.path, r.Status, r.Body)
			}
		}
	}
}

// TestReadToken: a read token runs E7, E8 and E9 and lists values, but may not post a
// value.
func TestReadToken(t *testing.T) {
	s := newScoped(t, env.Client(t))
	for _, req := range []struct {
		path string
		body map[string]any
	}{
		{"/api/v2.0/data/statistics/", map[string]any{"start": 0, "end": 1000, "variables": []any{map[string]any{"variable": s.varID}}, "aggregations": []string{"count"}}},
		{"/api/v1.6/data/stats/resample/", map[string]any{"variables": []string{s.varID}, "aggregation": "mean", "period": "1T", "start": 0, "end": 1000}},
		{"/api/v1.6/data/stats/aggregation/", map[string]any{"variables": []string{s.varID}, "aggregation": "max", "start": 0, "end": 1000}},
	} {
		if r := s.read.Post(req.path, req.body); r.Status != 200 {
			t.Errorf("%s: %d %s", req.path, r.Status, r.Body)
		}
	}
	if v := readValues(t, s.read, "/api/v1.6/devices/own/t/values"); len(v) != 1 {
		t.Errorf("values: %v", v)
	}
	if r := s.read.Post("/api/v1.6/devices/own/t/values", map[string]any{"value": 2}); r.Status != 403 {
		t.Errorf("post with a read token: %d %s", r.Status, r.Body)
	}
}

// TestDeviceToken: a device token posts and reads its own device's values, creates a
// variable under it, and gets 403001 on another device (existing or not), on v2.0
// device lists and on token routes.
func TestDeviceToken(t *testing.T) {
	s := newScoped(t, env.Client(t))
	if r := s.device.Post("/api/v1.6/devices/own/", map[string]any{"t": map[string]any{"value": 7, "timestamp": 700}, "fresh": 3}); r.Status != 200 {
		t.Fatalf("post own: %d %s", r.Status, r.Body)
	}
	if v := readValues(t, s.device, "/api/v1.6/devices/own/t/values"); len(v) != 2 || v[0].Value != 7 {
		t.Fatalf("read own: %v", v)
	}
	if v := readValues(t, s.device, "/api/v1.6/variables/"+s.varID+"/values"); len(v) != 2 {
		t.Fatalf("read own by id: %v", v)
	}
	if r := s.full.Get("/api/v2.0/devices/~own/variables/~fresh/"); r.Status != 200 {
		t.Fatalf("the new variable was not created under the device: %d", r.Status)
	}
	for _, p := range []struct{ method, path string }{
		{"POST", "/api/v1.6/devices/other/"},
		{"POST", "/api/v1.6/devices/not-there/"},
		{"GET", "/api/v1.6/devices/other/t/values"},
		{"GET", "/api/v1.6/variables/" + s.otherVarID + "/values"},
		{"GET", "/api/v2.0/devices/"},
		{"GET", "/api/v2.0/tokens/"},
		{"POST", "/api/v2.0/devices/~own/tokens/"},
	} {
		var body any
		if p.method == "POST" {
			body = map[string]any{"t": 1, "label": "x"}
		}
		if r := s.device.Do(p.method, p.path, body); r.Status != 403 {
			t.Errorf("%s %s: %d %s, want 403", p.method, p.path, r.Status, r.Body)
		}
	}
	var n int
	if err := env.DB.NewRaw(`SELECT count(*) FROM devices WHERE label = 'not-there'`).Scan(context.Background(), &n); err != nil || n != 0 {
		t.Fatalf("a device token created a device (%d, %v)", n, err)
	}
}

// TestTokenRoutes: the secret is shown once and stored hashed; lists never show it;
// a revoked token answers 401002 on another instance (notified: caches outlive the test); deleting a device
// deletes its tokens.
func TestTokenRoutes(t *testing.T) {
	a := env.Client(t)
	s := newScoped(t, a)
	list := s.full.Get("/api/v2.0/tokens/?page_size=100")
	if list.Status != 200 || strings.Contains(string(list.Body), s.read.Token) || strings.Contains(string(list.Body), `"token"`) {
		t.Fatalf("list: %d %s", list.Status, list.Body)
	}
	var body struct {
		Results []struct {
			ID, Label, Scope string
			Device           *struct{ ID, Label string }
		} `json:"results"`
	}
	if err := json.Unmarshal(list.Body, &body); err != nil {
		t.Fatal(err)
	}
	scopes := map[string]string{}
	for _, r := range body.Results {
		dev := ""
		if r.Device != nil {
			dev = r.Device.Label
		}
		scopes[r.Label] = r.Scope + "/" + dev
	}
	if scopes["dash"] != "read/" || scopes["fw"] != "device/own" || scopes["fw2"] != "device/other" {
		t.Fatalf("listed %v", scopes)
	}
	var stored int
	if err := env.DB.NewRaw(`SELECT count(*) FROM tokens WHERE hash = sha256(convert_to(?, 'UTF8'))`, s.read.Token).
		Scan(context.Background(), &stored); err != nil || stored != 1 {
		t.Fatalf("the secret's hash is not stored (%d, %v)", stored, err)
	}
	if r := s.full.Get("/api/v2.0/devices/~own/tokens/"); r.Status != 200 || !strings.Contains(string(r.Body), `"fw"`) ||
		strings.Contains(string(r.Body), `"fw2"`) {
		t.Fatalf("device tokens: %d %s", r.Status, r.Body)
	}
	if r := s.full.Post("/api/v2.0/tokens/", map[string]any{"label": "x", "scope": "device"}); r.Status != 400 ||
		!strings.Contains(string(r.Body), `"scope"`) {
		t.Fatalf("a device scope on the account route: %d %s", r.Status, r.Body)
	}

	// revocation across instances
	b := env.Instance(t)
	if r := b.As(s.read.Token).Get("/api/v2.0/devices/"); r.Status != 200 {
		t.Fatalf("before: %d", r.Status)
	}
	id := tokenID(t, s.full, "dash")
	if r := s.full.Delete("/api/v2.0/tokens/" + id + "/"); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, "the revoked token refused on the other instance", func() bool {
		return b.As(s.read.Token).Get("/api/v2.0/devices/").Status == 401
	})
	if r := s.full.Delete("/api/v2.0/devices/~own/tokens/" + tokenID(t, s.full, "fw") + "/"); r.Status != 204 {
		t.Fatalf("delete device token: %d %s", r.Status, r.Body)
	}
	if r := s.device.Get("/api/v1.6/devices/own/t/lv"); r.Status != 401 {
		t.Fatalf("deleted device token: %d", r.Status)
	}
	// deleting a device deletes its tokens
	if r := s.full.Delete("/api/v2.0/devices/~other/"); r.Status != 204 {
		t.Fatalf("delete device: %d", r.Status)
	}
	if r := s.otherDevice.Get("/api/v1.6/devices/other/t/lv"); r.Status != 401 {
		t.Fatalf("a token of a deleted device: %d %s", r.Status, r.Body)
	}
}

// tokenID finds a token's id by its label.
func tokenID(t *testing.T, c *testenv.Client, label string) string {
	t.Helper()
	var body struct {
		Results []struct{ ID, Label string } `json:"results"`
	}
	if err := json.Unmarshal(c.Get("/api/v2.0/tokens/?label="+label).Body, &body); err != nil || len(body.Results) != 1 {
		t.Fatalf("token %s: %v %v", label, body.Results, err)
	}
	return fmt.Sprint(body.Results[0].ID)
}
