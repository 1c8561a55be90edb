package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

func createOrganization(t *testing.T, c *testenv.Client, body map[string]any) map[string]any {
	t.Helper()
	r := c.Post("/api/v2.0/organizations/", body)
	wantStatus(t, r, http.StatusCreated)
	return r.Object(t)
}

func TestOrganizationCreate(t *testing.T) {
	c := accountClient(t)
	o := createOrganization(t, c, map[string]any{"label": "Acme-North.1"})
	id, _ := o["id"].(string)
	if !idRe.MatchString(id) {
		t.Fatalf("id %q", id)
	}
	want := map[string]any{"url": c.URL + "/api/v2.0/organizations/" + id, "id": id, "label": "acme-north.1",
		"name": "acme-north.1", "description": "", "properties": map[string]any{}}
	for k, v := range want {
		if !reflect.DeepEqual(o[k], v) {
			t.Errorf("%s = %#v, want %#v", k, o[k], v)
		}
	}
	if s, _ := o["createdAt"].(string); !createdAtRe.MatchString(s) || len(o) != 7 {
		t.Errorf("body %v", o)
	}
	full := map[string]any{"label": "b", "name": "Acme B", "description": "the B plant",
		"properties": map[string]any{"_color": "#ff0000"}}
	o = createOrganization(t, c, full)
	for k, v := range full {
		if !reflect.DeepEqual(o[k], v) {
			t.Errorf("%s = %#v, want %#v", k, o[k], v)
		}
	}
}

func TestOrganizationValidation(t *testing.T) {
	c := accountClient(t)
	createOrganization(t, c, map[string]any{"label": "taken"})
	cases := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"label required", map[string]any{"name": "x"}, "label"},
		{"label blank", map[string]any{"label": ""}, "label"},
		{"label starts with dash", map[string]any{"label": "-x"}, "label"},
		{"label space", map[string]any{"label": "a b"}, "label"},
		{"label 101", map[string]any{"label": strings.Repeat("a", 101)}, "label"},
		{"label type", map[string]any{"label": 5}, "label"},
		{"label taken, other case", map[string]any{"label": "TAKEN"}, "label"},
		{"name blank", map[string]any{"label": "n1", "name": ""}, "name"},
		{"name 201", map[string]any{"label": "n2", "name": strings.Repeat("a", 201)}, "name"},
		{"name type", map[string]any{"label": "n3", "name": 1}, "name"},
		{"description 2001", map[string]any{"label": "n4", "description": strings.Repeat("a", 2001)}, "description"},
		{"properties type", map[string]any{"label": "n5", "properties": "x"}, "properties"},
		{"properties too big", map[string]any{"label": "n6", "properties": map[string]any{"x": strings.Repeat("a", 17000)}}, "properties"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			detail := wantValidation(t, c.Post("/api/v2.0/organizations", tc.body), tc.field)
			if len(detail) != 1 {
				t.Fatalf("detail %v", detail)
			}
		})
	}
	if n := c.Get("/api/v2.0/organizations").Object(t)["count"]; n != float64(1) {
		t.Fatalf("count %v after invalid bodies", n)
	}
	wantValidation(t, c.Post("/api/v2.0/organizations", "[]"), "body")
}

func TestOrganizationReadUpdateDelete(t *testing.T) {
	c := accountClient(t)
	o := createOrganization(t, c, map[string]any{"label": "plant", "name": "Plant", "description": "d"})
	id := o["id"].(string)
	for _, key := range []string{id, "~plant", "~PLANT"} {
		r := c.Get("/api/v2.0/organizations/" + key + "/")
		wantStatus(t, r, http.StatusOK)
		if !reflect.DeepEqual(r.Object(t), o) {
			t.Fatalf("GET %s: %s", key, r.Body)
		}
	}
	wantNotFound(t, c.Get("/api/v2.0/organizations/~nothing"))
	wantNotFound(t, c.Get("/api/v2.0/organizations/zz"))

	r := c.Patch("/api/v2.0/organizations/~plant", map[string]any{"name": "Plant 2", "properties": map[string]any{"a": 1}})
	wantStatus(t, r, http.StatusOK)
	got := r.Object(t)
	if got["name"] != "Plant 2" || got["description"] != "d" || got["label"] != "plant" ||
		!reflect.DeepEqual(got["properties"], map[string]any{"a": float64(1)}) {
		t.Fatalf("PATCH: %s", r.Body)
	}
	createOrganization(t, c, map[string]any{"label": "other"})
	wantValidation(t, c.Patch("/api/v2.0/organizations/"+id, map[string]any{"label": "Other"}), "label")
	wantValidation(t, c.Patch("/api/v2.0/organizations/"+id, map[string]any{"label": "bad label"}), "label")

	wantValidation(t, c.Do("PUT", "/api/v2.0/organizations/"+id, map[string]any{"name": "x"}), "label")
	r = c.Do("PUT", "/api/v2.0/organizations/"+id, map[string]any{"label": "Renamed", "name": "R"})
	wantStatus(t, r, http.StatusOK)
	if got := r.Object(t); got["label"] != "renamed" || got["name"] != "R" || got["id"] != id {
		t.Fatalf("PUT: %s", r.Body)
	}

	r = c.Delete("/api/v2.0/organizations/~renamed")
	wantStatus(t, r, http.StatusNoContent)
	wantNotFound(t, c.Get("/api/v2.0/organizations/"+id))
	wantNotFound(t, c.Delete("/api/v2.0/organizations/"+id))
}

func TestOrganizationList(t *testing.T) {
	c := accountClient(t)
	var ids []string
	for _, l := range []string{"beta", "alpha", "gamma"} {
		ids = append(ids, createOrganization(t, c, map[string]any{"label": l, "name": strings.ToUpper(l)})["id"].(string))
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{ids[2], ids[1], ids[0]}},
		{"sort_by=label", []string{ids[1], ids[0], ids[2]}},
		{"sort_by=-name", []string{ids[2], ids[0], ids[1]}},
		{"label=alpha", []string{ids[1]}},
		{"id__in=" + ids[0] + "," + ids[2], []string{ids[2], ids[0]}},
		{"search=AMM", []string{ids[2]}},
		{"label__startswith!=a&sort_by=label", []string{ids[0], ids[2]}},
		{"page_size=1&page=2", []string{ids[1]}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			r := c.Get("/api/v2.0/organizations?" + tc.query)
			wantStatus(t, r, http.StatusOK)
			var got []string
			for _, it := range r.Object(t)["results"].([]any) {
				got = append(got, it.(map[string]any)["id"].(string))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOrganizationAccountIsolation(t *testing.T) {
	a, b := accountClient(t), accountClient(t)
	o := createOrganization(t, a, map[string]any{"label": "secret"})
	for _, key := range []string{o["id"].(string), "~secret"} {
		p := "/api/v2.0/organizations/" + key
		wantNotFound(t, b.Get(p))
		wantNotFound(t, b.Patch(p, map[string]any{"name": "x"}))
		wantNotFound(t, b.Do("PUT", p, map[string]any{"label": "x"}))
		wantNotFound(t, b.Delete(p))
	}
	if n := b.Get("/api/v2.0/organizations").Object(t)["count"]; n != float64(0) {
		t.Fatalf("another account lists the Organization: %v", n)
	}
	// labels are per account
	createOrganization(t, b, map[string]any{"label": "secret"})
	u := createUser(t, b, nil)
	r := b.Post("/api/v2.0/users/"+u["id"].(string)+"/_/assign_organizations",
		[]any{map[string]any{"label": "secret", "role": "viewer"}})
	wantStatus(t, r, http.StatusOK)
	if org := r.Object(t)["organizations"].([]any)[0].(map[string]any); org["id"] == o["id"] {
		t.Fatal("assigned another account's Organization")
	}
	if got := a.Get("/api/v2.0/organizations/" + o["id"].(string)).Object(t); got["name"] != "secret" {
		t.Fatalf("another account changed the Organization: %v", got)
	}
}

func TestRoles(t *testing.T) {
	c := accountClient(t)
	r := c.Get("/api/v2.0/roles/")
	wantStatus(t, r, http.StatusOK)
	body := r.Object(t)
	if body["count"] != float64(3) || body["next"] != nil {
		t.Fatalf("body %s", r.Body)
	}
	for i, label := range []string{"admin", "editor", "viewer"} {
		role := body["results"].([]any)[i].(map[string]any)
		id, _ := role["id"].(string)
		if !idRe.MatchString(id) || role["label"] != label || role["name"] != label ||
			role["url"] != c.URL+"/api/v2.0/roles/"+id || !createdAtRe.MatchString(role["createdAt"].(string)) {
			t.Fatalf("role %d: %v", i, role)
		}
		for _, key := range []string{id, "~" + label} {
			got := c.Get("/api/v2.0/roles/" + key)
			wantStatus(t, got, http.StatusOK)
			if !reflect.DeepEqual(got.Object(t), role) {
				t.Fatalf("GET role %s: %s", key, got.Body)
			}
		}
		wantNotFound(t, accountClient(t).Get("/api/v2.0/roles/"+id))
	}
	wantNotFound(t, c.Get("/api/v2.0/roles/~owner"))
}

func TestAssignOrganizations(t *testing.T) {
	c := accountClient(t)
	acme := createOrganization(t, c, map[string]any{"label": "acme", "name": "Acme",
		"properties": map[string]any{"_color": "#00ff00"}})
	createOrganization(t, c, map[string]any{"label": "beta"})
	u := createUser(t, c, nil)
	path := "/api/v2.0/users/" + u["id"].(string) + "/_/assign_organizations/"
	roles := map[string]map[string]any{}
	for _, it := range c.Get("/api/v2.0/roles").Object(t)["results"].([]any) {
		r := it.(map[string]any)
		roles[r["label"].(string)] = r
	}

	r := c.Post(path, []any{map[string]any{"label": "ACME", "role": "editor"}})
	wantStatus(t, r, http.StatusOK)
	got := r.Object(t)
	wantSummary := map[string]any{"url": acme["url"], "id": acme["id"], "label": "acme", "name": "Acme",
		"createdAt": acme["createdAt"], "properties": map[string]any{"_color": "#00ff00"},
		"role": map[string]any{"url": roles["editor"]["url"], "label": "editor", "name": "editor",
			"createdAt": roles["editor"]["createdAt"]}}
	if got["organizationsCount"] != float64(1) || !reflect.DeepEqual(got["organizations"], []any{wantSummary}) {
		t.Fatalf("organizations %v", got["organizations"])
	}

	t.Run("changes the role and adds another", func(t *testing.T) {
		r := c.Post(path, []any{map[string]any{"label": "acme", "role": "viewer"},
			map[string]any{"label": "beta", "role": "viewer"}, map[string]any{"label": "acme", "role": "admin"}})
		wantStatus(t, r, http.StatusOK)
		orgs := r.Object(t)["organizations"].([]any)
		if len(orgs) != 2 || r.Object(t)["organizationsCount"] != float64(2) {
			t.Fatalf("organizations %v", orgs)
		}
		roleOf := func(i int) any { return orgs[i].(map[string]any)["role"].(map[string]any)["label"] }
		if roleOf(0) != "admin" || roleOf(1) != "viewer" {
			t.Fatalf("roles %v %v", roleOf(0), roleOf(1))
		}
	})
	t.Run("GET, PATCH and list show them", func(t *testing.T) {
		for _, resp := range []testenv.Response{
			c.Get("/api/v2.0/users/" + u["id"].(string)),
			c.Patch("/api/v2.0/users/"+u["id"].(string), map[string]any{"firstName": "A"}),
		} {
			if n := resp.Object(t)["organizationsCount"]; n != float64(2) {
				t.Fatalf("organizationsCount %v: %s", n, resp.Body)
			}
		}
		item := c.Get("/api/v2.0/users?id=" + u["id"].(string)).Object(t)["results"].([]any)[0].(map[string]any)
		if item["organizationsCount"] != float64(2) {
			t.Fatalf("list item %v", item)
		}
	})
	invalid := []struct {
		name   string
		body   any
		fields []string
	}{
		{"unknown organization", []any{map[string]any{"label": "nope", "role": "admin"}}, []string{"0.label"}},
		{"unknown role", []any{map[string]any{"label": "acme", "role": "admin"}, map[string]any{"label": "acme", "role": "owner"}}, []string{"1.role"}},
		{"missing fields", []any{map[string]any{}}, []string{"0.label", "0.role"}},
		{"wrong types", []any{map[string]any{"label": 1, "role": true}}, []string{"0.label", "0.role"}},
		{"item not an object", []any{"acme"}, []string{"0"}},
		{"not an array", map[string]any{"label": "acme", "role": "admin"}, []string{"body"}},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			wantValidation(t, c.Post(path, tc.body), tc.fields...)
			orgs := c.Get("/api/v2.0/users/" + u["id"].(string)).Object(t)["organizations"].([]any)
			if len(orgs) != 2 || orgs[0].(map[string]any)["role"].(map[string]any)["label"] != "admin" {
				t.Fatalf("a refused assignment changed the User: %v", orgs)
			}
		})
	}
	t.Run("deleting an organization removes it from the user", func(t *testing.T) {
		wantStatus(t, c.Delete("/api/v2.0/organizations/~beta"), http.StatusNoContent)
		got := c.Get("/api/v2.0/users/" + u["id"].(string)).Object(t)
		if got["organizationsCount"] != float64(1) {
			t.Fatalf("user %v", got)
		}
	})
	t.Run("unknown user", func(t *testing.T) {
		wantNotFound(t, c.Post("/api/v2.0/users/~nobody_at_all/_/assign_organizations", []any{}))
	})
}

func TestRemoveOrganizations(t *testing.T) {
	c := accountClient(t)
	for _, l := range []string{"one", "two", "three"} {
		createOrganization(t, c, map[string]any{"label": l})
	}
	u := createUser(t, c, nil)
	base := "/api/v2.0/users/~" + u["username"].(string) + "/_/"
	wantStatus(t, c.Post(base+"assign_organizations", []any{map[string]any{"label": "one", "role": "admin"},
		map[string]any{"label": "two", "role": "viewer"}}), http.StatusOK)

	labels := func(r testenv.Response) []string {
		t.Helper()
		wantStatus(t, r, http.StatusOK)
		var out []string
		for _, o := range r.Object(t)["organizations"].([]any) {
			out = append(out, o.(map[string]any)["label"].(string))
		}
		return out
	}
	// "three" is none of the User's: removing it is no error
	got := labels(c.Post(base+"remove_organizations", []any{map[string]any{"label": "ONE"}, map[string]any{"label": "three"}}))
	if !reflect.DeepEqual(got, []string{"two"}) {
		t.Fatalf("organizations %v", got)
	}
	wantValidation(t, c.Post(base+"remove_organizations", []any{map[string]any{"label": "two"}, map[string]any{"label": "zzz"}}), "1.label")
	wantValidation(t, c.Post(base+"remove_organizations", []any{map[string]any{}}), "0.label")
	if got := labels(c.Get("/api/v2.0/users/" + u["id"].(string))); !reflect.DeepEqual(got, []string{"two"}) {
		t.Fatalf("a refused removal changed the User: %v", got)
	}
	if got := labels(c.Post(base+"remove_organizations", []any{map[string]any{"label": "two"}})); got != nil {
		t.Fatalf("organizations %v", got)
	}
	wantNotFound(t, accountClient(t).Post(base+"remove_organizations", []any{}))
}

func TestUserOrganizationRoutesNeedToken(t *testing.T) {
	anon := env.Client(t).As("")
	routes := [][2]string{
		{"GET", "/api/v2.0/users"}, {"POST", "/api/v2.0/users/"}, {"GET", "/api/v2.0/users/~ana"},
		{"PATCH", "/api/v2.0/users/~ana"}, {"PUT", "/api/v2.0/users/~ana"}, {"DELETE", "/api/v2.0/users/~ana"},
		{"POST", "/api/v2.0/users/~ana/_/assign_organizations"}, {"POST", "/api/v2.0/users/~ana/_/remove_organizations"},
		{"GET", "/api/v2.0/organizations"}, {"POST", "/api/v2.0/organizations"}, {"GET", "/api/v2.0/organizations/~a"},
		{"PATCH", "/api/v2.0/organizations/~a"}, {"PUT", "/api/v2.0/organizations/~a"},
		{"DELETE", "/api/v2.0/organizations/~a"}, {"GET", "/api/v2.0/roles"}, {"GET", "/api/v2.0/roles/~admin"},
	}
	for _, rt := range routes {
		r := anon.Do(rt[0], rt[1], map[string]any{})
		if r.Status != http.StatusUnauthorized || string(r.Body) != body401001 {
			t.Errorf("%s %s: %d %s", rt[0], rt[1], r.Status, r.Body)
		}
	}
	if r := env.Client(t).Delete("/api/v2.0/users"); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE on the list: %d %s", r.Status, r.Body)
	}
}
