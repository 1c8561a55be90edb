package api_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var (
	nameSeq atomic.Int64
)

// uniqueName makes usernames unique across the whole test database (they are global).
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// accountClient is a client of a fresh account, so lists hold only the test's rows.
func accountClient(t *testing.T) *testenv.Client {
	t.Helper()
	return env.Client(t).As(env.NewAccount(t))
}

// userBody is a valid create body with the given fields added or replaced.
func userBody(extra map[string]any) map[string]any {
	b := map[string]any{"username": uniqueName("ana"), "email": "ana@example.com", "password": "s3cret-pass"}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func createUser(t *testing.T, c *testenv.Client, extra map[string]any) map[string]any {
	t.Helper()
	r := c.Post("/api/v2.0/users/", userBody(extra))
	if r.Status != http.StatusOK {
		t.Fatalf("create user: status %d: %s", r.Status, r.Body)
	}
	return r.Object(t)
}

// wantValidation asserts a 400001 whose detail names every given field.
func wantValidation(t *testing.T, r testenv.Response, fields ...string) map[string]any {
	t.Helper()
	if r.Status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", r.Status, r.Body)
	}
	body := r.Object(t)
	if body["code"] != float64(400001) || body["message"] != "Validation Error." {
		t.Fatalf("body %s", r.Body)
	}
	detail, _ := body["detail"].(map[string]any)
	for _, f := range fields {
		msgs, _ := detail[f].([]any)
		if len(msgs) == 0 {
			t.Fatalf("detail does not name %q: %s", f, r.Body)
		}
	}
	return detail
}

func wantStatus(t *testing.T, r testenv.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

func wantNotFound(t *testing.T, r testenv.Response) {
	t.Helper()
	wantStatus(t, r, http.StatusNotFound)
	if r.Object(t)["code"] != float64(404001) {
		t.Fatalf("body %s", r.Body)
	}
}

func gravatar(email string) string {
	sum := md5.Sum([]byte(strings.ToLower(strings.TrimSpace(email))))
	return "https://www.gravatar.com/avatar/" + hex.EncodeToString(sum[:]) + "?d=identicon"
}

func TestUserCreateDefaults(t *testing.T) {
	c := accountClient(t)
	before := time.Now().Add(-time.Second).UnixMilli()
	name := uniqueName("Ana-")
	u := createUser(t, c, map[string]any{"username": name, "email": "Ana.Lopez@Example.COM"})
	after := time.Now().Add(time.Second).UnixMilli()

	id, _ := u["id"].(string)
	if !idRe.MatchString(id) {
		t.Fatalf("id %q", id)
	}
	want := map[string]any{
		"url": c.URL + "/api/v2.0/users/" + id, "id": id, "username": name,
		"firstName": "", "lastName": "", "email": "Ana.Lopez@Example.COM",
		"defaultOrganization": nil, "defaultRole": nil, "defaultDashboard": nil,
		"mugshotUrl": gravatar("ana.lopez@example.com"), "language": nil, "website": "", "timezone": nil,
		"decimalPlaces": nil, "numberFormat": nil, "firstTime": true,
		"organizations": []any{}, "organizationsCount": float64(0), "isActive": true, "lastLogin": nil,
		"tags": []any{}, "contactMethods": []any{},
	}
	for k, v := range want {
		if !reflect.DeepEqual(u[k], v) {
			t.Errorf("%s = %#v, want %#v", k, u[k], v)
		}
	}
	if s, _ := u["createdAt"].(string); !createdAtRe.MatchString(s) {
		t.Errorf("createdAt %q", s)
	}
	props, _ := u["properties"].(map[string]any)
	ts, _ := props["password_update_timestamp"].(float64)
	if len(props) != 1 || ts < float64(before) || ts > float64(after) || ts != float64(int64(ts)) {
		t.Errorf("properties %v, want only password_update_timestamp in [%d, %d]", props, before, after)
	}
	keys := make([]string, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wantKeys := "contactMethods createdAt decimalPlaces defaultDashboard defaultOrganization defaultRole email " +
		"firstName firstTime id isActive language lastLogin lastName mugshotUrl numberFormat organizations " +
		"organizationsCount properties tags timezone url username website"
	if strings.Join(keys, " ") != wantKeys {
		t.Errorf("keys %v", keys)
	}
}

func TestUserCreateEveryField(t *testing.T) {
	c := accountClient(t)
	set := map[string]any{
		"firstName": "Ana", "lastName": "López", "defaultOrganization": "acme", "defaultRole": "editor",
		"defaultDashboard": "d1", "language": "es", "website": "https://ana.example", "timezone": "Europe/Madrid",
		"decimalPlaces": float64(3), "numberFormat": "1.234,56", "isActive": false, "firstTime": false,
		"tags": []any{"ops", "night"},
		"contactMethods": []any{
			map[string]any{"type": "email", "value": "ana@example.com"},
			map[string]any{"type": "sms", "value": "+34600000000"},
			map[string]any{"type": "phone", "value": "+34900000000"},
			map[string]any{"type": "telegram", "value": "@ana"},
		},
	}
	u := createUser(t, c, set)
	for k, v := range set {
		if !reflect.DeepEqual(u[k], v) {
			t.Errorf("%s = %#v, want %#v", k, u[k], v)
		}
	}
	got := c.Get("/api/v2.0/users/" + u["id"].(string)).Object(t)
	for k, v := range set {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("stored %s = %#v, want %#v", k, got[k], v)
		}
	}
}

func TestUserCreateProperties(t *testing.T) {
	c := accountClient(t)
	u := createUser(t, c, map[string]any{"properties": map[string]any{
		"color": "#fff", "n": 12345678901234567, "password_update_timestamp": 1}})
	props := u["properties"].(map[string]any)
	if props["color"] != "#fff" || props["password_update_timestamp"] == float64(1) {
		t.Fatalf("properties %v: client values kept, password_update_timestamp owned by the server", props)
	}
	if !bytes.Contains(c.Get("/api/v2.0/users/"+u["id"].(string)).Body, []byte(`"n":12345678901234567`)) {
		t.Fatal("a large integer property lost precision")
	}
}

func TestUserValidation(t *testing.T) {
	c := accountClient(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	tags21 := make([]any, 21)
	for i := range tags21 {
		tags21[i] = "t"
	}
	cases := []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"username null", map[string]any{"username": nil}, []string{"username"}},
		{"username blank", map[string]any{"username": ""}, []string{"username"}},
		{"username space", map[string]any{"username": "ana lopez"}, []string{"username"}},
		{"username at", map[string]any{"username": "ana@x"}, []string{"username"}},
		{"username dot", map[string]any{"username": "ana.lopez"}, []string{"username"}},
		{"username 151", map[string]any{"username": long(151)}, []string{"username"}},
		{"username testing", map[string]any{"username": "testingbob"}, []string{"username"}},
		{"username TESTING", map[string]any{"username": "TESTING_bob"}, []string{"username"}},
		{"username type", map[string]any{"username": 12}, []string{"username"}},
		{"email invalid", map[string]any{"email": "nope"}, []string{"email"}},
		{"email no dot", map[string]any{"email": "a@b"}, []string{"email"}},
		{"email display name", map[string]any{"email": "Ana <ana@example.com>"}, []string{"email"}},
		{"email blank", map[string]any{"email": ""}, []string{"email"}},
		{"email type", map[string]any{"email": 5}, []string{"email"}},
		{"password short", map[string]any{"password": "1234567"}, []string{"password"}},
		{"password over 72 bytes", map[string]any{"password": long(73)}, []string{"password"}},
		{"password type", map[string]any{"password": 12345678}, []string{"password"}},
		{"password null", map[string]any{"password": nil}, []string{"password"}},
		{"firstName type", map[string]any{"firstName": 1}, []string{"firstName"}},
		{"lastName too long", map[string]any{"lastName": long(151)}, []string{"lastName"}},
		{"website type", map[string]any{"website": false}, []string{"website"}},
		{"defaultOrganization type", map[string]any{"defaultOrganization": 3}, []string{"defaultOrganization"}},
		{"defaultRole type", map[string]any{"defaultRole": []any{}}, []string{"defaultRole"}},
		{"defaultDashboard type", map[string]any{"defaultDashboard": 1}, []string{"defaultDashboard"}},
		{"language type", map[string]any{"language": 1}, []string{"language"}},
		{"numberFormat type", map[string]any{"numberFormat": 1}, []string{"numberFormat"}},
		{"timezone unknown", map[string]any{"timezone": "Mars/Olympus"}, []string{"timezone"}},
		{"decimalPlaces 17", map[string]any{"decimalPlaces": 17}, []string{"decimalPlaces"}},
		{"decimalPlaces -1", map[string]any{"decimalPlaces": -1}, []string{"decimalPlaces"}},
		{"decimalPlaces fraction", map[string]any{"decimalPlaces": 2.5}, []string{"decimalPlaces"}},
		{"decimalPlaces string", map[string]any{"decimalPlaces": "3"}, []string{"decimalPlaces"}},
		{"isActive type", map[string]any{"isActive": "yes"}, []string{"isActive"}},
		{"isActive null", map[string]any{"isActive": nil}, []string{"isActive"}},
		{"firstTime type", map[string]any{"firstTime": 1}, []string{"firstTime"}},
		{"tags 21", map[string]any{"tags": tags21}, []string{"tags"}},
		{"tag 51 chars", map[string]any{"tags": []any{"ok", long(51)}}, []string{"tags.1"}},
		{"tag type", map[string]any{"tags": []any{1}}, []string{"tags.0"}},
		{"tags type", map[string]any{"tags": "a,b"}, []string{"tags"}},
		{"contactMethods type", map[string]any{"contactMethods": "x"}, []string{"contactMethods"}},
		{"contactMethods item type", map[string]any{"contactMethods": []any{"x"}}, []string{"contactMethods.0"}},
		{"contactMethods bad type", map[string]any{"contactMethods": []any{
			map[string]any{"type": "email", "value": "a@b.co"}, map[string]any{"type": "fax", "value": "1"}}},
			[]string{"contactMethods.1.type"}},
		{"contactMethods missing value", map[string]any{"contactMethods": []any{map[string]any{"type": "sms"}}},
			[]string{"contactMethods.0.value"}},
		{"contactMethods blank value", map[string]any{"contactMethods": []any{
			map[string]any{"type": "sms", "value": ""}}}, []string{"contactMethods.0.value"}},
		{"properties type", map[string]any{"properties": []any{}}, []string{"properties"}},
		{"several at once", map[string]any{"username": "", "email": "x", "password": "1", "decimalPlaces": 99},
			[]string{"username", "email", "password", "decimalPlaces"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			detail := wantValidation(t, c.Post("/api/v2.0/users", userBody(tc.body)), tc.fields...)
			if len(detail) != len(tc.fields) {
				t.Fatalf("detail %v names more than %v", detail, tc.fields)
			}
		})
	}
	for _, field := range []string{"username", "email", "password"} {
		t.Run(field+" required", func(t *testing.T) {
			body := userBody(nil)
			delete(body, field)
			if detail := wantValidation(t, c.Post("/api/v2.0/users", body), field); len(detail) != 1 {
				t.Fatalf("detail %v", detail)
			}
		})
	}
	t.Run("all required", func(t *testing.T) {
		wantValidation(t, c.Post("/api/v2.0/users", map[string]any{}), "username", "email", "password")
	})
	t.Run("not an object", func(t *testing.T) {
		wantValidation(t, c.Post("/api/v2.0/users", []any{}), "body")
	})
	t.Run("nothing was created", func(t *testing.T) {
		if n := c.Get("/api/v2.0/users").Object(t)["count"]; n != float64(0) {
			t.Fatalf("count %v after invalid bodies", n)
		}
	})
}

func TestUserValidationBoundaries(t *testing.T) {
	c := accountClient(t)
	tags20 := make([]any, 20)
	for i := range tags20 {
		tags20[i] = fmt.Sprintf("%02d", i) + strings.Repeat("x", 48)
	}
	cases := []struct {
		name  string
		body  map[string]any
		field string
		want  any
	}{
		{"username 150", map[string]any{"username": uniqueName("u") + strings.Repeat("x", 130)}, "", nil},
		{"username with dash and underscore", map[string]any{"username": uniqueName("A-b_")}, "", nil},
		{"username containing testing", map[string]any{"username": uniqueName("my_testing")}, "", nil},
		{"password 8", map[string]any{"password": "12345678"}, "", nil},
		{"decimalPlaces 0", map[string]any{"decimalPlaces": 0}, "decimalPlaces", float64(0)},
		{"decimalPlaces 16", map[string]any{"decimalPlaces": 16}, "decimalPlaces", float64(16)},
		{"decimalPlaces null", map[string]any{"decimalPlaces": nil}, "decimalPlaces", nil},
		{"tags 20 of 50", map[string]any{"tags": tags20}, "tags", tags20},
		{"nullable string null", map[string]any{"language": nil}, "language", nil},
		{"timezone UTC", map[string]any{"timezone": "UTC"}, "timezone", "UTC"},
		{"unknown field ignored", map[string]any{"favouriteColour": "blue"}, "favouriteColour", nil},
		{"read-only fields ignored", map[string]any{"id": "x", "organizations": "x", "lastLogin": "x"},
			"lastLogin", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := userBody(tc.body)
			if u, ok := tc.body["username"].(string); ok && len(u) > 150 {
				body["username"] = u[:150]
			}
			u := createUser(t, c, body)
			if tc.field != "" && !reflect.DeepEqual(u[tc.field], tc.want) {
				t.Fatalf("%s = %#v, want %#v", tc.field, u[tc.field], tc.want)
			}
		})
	}
}

func TestUserUsernameUnique(t *testing.T) {
	c := accountClient(t)
	name := uniqueName("Dup")
	createUser(t, c, map[string]any{"username": name})
	t.Run("same account, other case", func(t *testing.T) {
		wantValidation(t, c.Post("/api/v2.0/users", userBody(map[string]any{"username": strings.ToLower(name)})),
			"username")
	})
	t.Run("other account", func(t *testing.T) {
		other := accountClient(t)
		wantValidation(t, other.Post("/api/v2.0/users", userBody(map[string]any{"username": strings.ToUpper(name)})),
			"username")
	})
	t.Run("rename onto it", func(t *testing.T) {
		u := createUser(t, c, nil)
		wantValidation(t, c.Patch("/api/v2.0/users/"+u["id"].(string), map[string]any{"username": name}), "username")
	})
}

func TestUserPatch(t *testing.T) {
	c := accountClient(t)
	u := createUser(t, c, map[string]any{"firstName": "Ana", "tags": []any{"a"}, "language": "es"})
	id := u["id"].(string)
	path := "/api/v2.0/users/" + id

	r := c.Patch(path, map[string]any{"lastName": "López", "language": nil, "decimalPlaces": 2})
	wantStatus(t, r, http.StatusOK)
	got := r.Object(t)
	for k, v := range map[string]any{"lastName": "López", "language": nil, "decimalPlaces": float64(2),
		"firstName": "Ana", "tags": []any{"a"}, "username": u["username"], "email": u["email"]} {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if got["properties"].(map[string]any)["password_update_timestamp"] !=
		u["properties"].(map[string]any)["password_update_timestamp"] {
		t.Error("a PATCH changed password_update_timestamp")
	}

	t.Run("by ~username, case-insensitive", func(t *testing.T) {
		r := c.Patch("/api/v2.0/users/~"+strings.ToUpper(u["username"].(string)), map[string]any{"website": "w"})
		wantStatus(t, r, http.StatusOK)
		if r.Object(t)["website"] != "w" {
			t.Fatalf("body %s", r.Body)
		}
	})
	t.Run("email changes the mugshot", func(t *testing.T) {
		r := c.Patch(path+"/", map[string]any{"email": "new@example.org"})
		wantStatus(t, r, http.StatusOK)
		if r.Object(t)["mugshotUrl"] != gravatar("new@example.org") {
			t.Fatalf("body %s", r.Body)
		}
	})
	t.Run("empty body changes nothing", func(t *testing.T) {
		wantStatus(t, c.Patch(path, map[string]any{}), http.StatusOK)
	})
	invalid := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"password": "another-pass"}, "password"},
		{map[string]any{"username": "testingx"}, "username"},
		{map[string]any{"username": "a b"}, "username"},
		{map[string]any{"email": "no"}, "email"},
		{map[string]any{"decimalPlaces": 17}, "decimalPlaces"},
		{map[string]any{"tags": []any{strings.Repeat("x", 51)}}, "tags.0"},
		{map[string]any{"isActive": "false"}, "isActive"},
	}
	for _, tc := range invalid {
		t.Run("invalid "+tc.field, func(t *testing.T) {
			body := map[string]any{"firstName": "Changed"}
			for k, v := range tc.body {
				body[k] = v
			}
			wantValidation(t, c.Patch(path, body), tc.field)
			if c.Get(path).Object(t)["firstName"] != "Ana" {
				t.Fatal("a refused PATCH changed the User")
			}
		})
	}
}

func TestUserPut(t *testing.T) {
	c := accountClient(t)
	u := createUser(t, c, map[string]any{"firstName": "Ana"})
	path := "/api/v2.0/users/" + u["id"].(string)
	wantValidation(t, c.Do("PUT", path, map[string]any{"firstName": "B"}), "username", "email")
	name := uniqueName("put")
	r := c.Do("PUT", path, map[string]any{"username": name, "email": "put@example.com", "lastName": "P"})
	wantStatus(t, r, http.StatusOK)
	got := r.Object(t)
	if got["username"] != name || got["email"] != "put@example.com" || got["lastName"] != "P" || got["firstName"] != "Ana" {
		t.Fatalf("body %s", r.Body)
	}
	wantValidation(t, c.Do("PUT", path, map[string]any{"username": name, "email": "put@example.com",
		"password": "12345678"}), "password")
}

func TestUserList(t *testing.T) {
	c := accountClient(t)
	var ids, names []string
	for i := 0; i < 3; i++ {
		u := createUser(t, c, map[string]any{"email": fmt.Sprintf("u%d@example.com", i)})
		ids, names = append(ids, u["id"].(string)), append(names, u["username"].(string))
	}
	list := func(t *testing.T, query string) (int, []string) {
		t.Helper()
		r := c.Get("/api/v2.0/users/?" + query)
		wantStatus(t, r, http.StatusOK)
		body := r.Object(t)
		var got []string
		for _, it := range body["results"].([]any) {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		return int(body["count"].(float64)), got
	}
	cases := []struct {
		query string
		count int
		want  []string
	}{
		{"", 3, []string{ids[2], ids[1], ids[0]}},
		{"id=" + ids[1], 1, []string{ids[1]}},
		{"id__in=" + ids[0] + "," + ids[2], 2, []string{ids[2], ids[0]}},
		{"id=not-an-id", 0, nil},
		{"username=" + names[0], 1, []string{ids[0]}},
		{"username__iexact=" + strings.ToUpper(names[0]), 1, []string{ids[0]}},
		{"email=u2@example.com", 1, []string{ids[2]}},
		{"email!=u2@example.com", 2, []string{ids[1], ids[0]}},
		{"sort_by=createdAt", 3, []string{ids[0], ids[1], ids[2]}},
		{"page_size=2", 3, []string{ids[2], ids[1]}},
		{"page_size=2&page=2", 3, []string{ids[0]}},
		{"page=5", 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			n, got := list(t, tc.query)
			if n != tc.count || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("count %d %v, want %d %v", n, got, tc.count, tc.want)
			}
		})
	}
	t.Run("next link", func(t *testing.T) {
		body := c.Get("/api/v2.0/users?page_size=2").Object(t)
		if body["next"] != c.URL+"/api/v2.0/users?page=2&page_size=2" || body["previous"] != nil {
			t.Fatalf("next %v previous %v", body["next"], body["previous"])
		}
	})
	t.Run("results are full Users", func(t *testing.T) {
		it := c.Get("/api/v2.0/users?id=" + ids[0]).Object(t)["results"].([]any)[0].(map[string]any)
		if it["url"] != c.URL+"/api/v2.0/users/"+ids[0] || it["organizations"] == nil || it["properties"] == nil {
			t.Fatalf("item %v", it)
		}
	})
}

func TestUserGetDelete(t *testing.T) {
	c := accountClient(t)
	u := createUser(t, c, nil)
	id, name := u["id"].(string), u["username"].(string)
	for _, key := range []string{id, "~" + name, "~" + strings.ToUpper(name)} {
		r := c.Get("/api/v2.0/users/" + key)
		wantStatus(t, r, http.StatusOK)
		if !reflect.DeepEqual(r.Object(t), u) {
			t.Fatalf("GET %s\n got %s\nwant %v", key, r.Body, u)
		}
	}
	for _, key := range []string{"0123456789abcdef01234567", "nope", "~nobody_here", "~bad%20name"} {
		wantNotFound(t, c.Get("/api/v2.0/users/"+key))
	}
	r := c.Delete("/api/v2.0/users/~" + name)
	wantStatus(t, r, http.StatusNoContent)
	if len(r.Body) != 0 {
		t.Fatalf("204 with a body: %s", r.Body)
	}
	wantNotFound(t, c.Get("/api/v2.0/users/"+id))
	wantNotFound(t, c.Delete("/api/v2.0/users/"+id))
	// the username is free again
	createUser(t, c, map[string]any{"username": name})
}

func TestUserAccountIsolation(t *testing.T) {
	a, b := accountClient(t), accountClient(t)
	u := createUser(t, a, nil)
	id, name := u["id"].(string), u["username"].(string)
	for _, key := range []string{id, "~" + name} {
		p := "/api/v2.0/users/" + key
		wantNotFound(t, b.Get(p))
		wantNotFound(t, b.Patch(p, map[string]any{"firstName": "x"}))
		wantNotFound(t, b.Do("PUT", p, map[string]any{"username": uniqueName("x"), "email": "x@example.com"}))
		wantNotFound(t, b.Delete(p))
		wantNotFound(t, b.Post(p+"/_/assign_organizations", []any{}))
	}
	if n := b.Get("/api/v2.0/users?id=" + id).Object(t)["count"]; n != float64(0) {
		t.Fatalf("another account lists the User: count %v", n)
	}
	if got := a.Get("/api/v2.0/users/" + id).Object(t); got["firstName"] != "" {
		t.Fatalf("another account changed the User: %v", got)
	}
	if r := a.As("").Get("/api/v2.0/users"); r.Status != http.StatusUnauthorized || string(r.Body) != body401001 {
		t.Fatalf("without token: %d %s", r.Status, r.Body)
	}
}

// The password and its hash never appear in a response or the server's log.
func TestUserPasswordNeverExposed(t *testing.T) {
	var logs bytes.Buffer
	c := env.Client(t)
	c.Server.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c = c.As(env.NewAccount(t))
	const password = "Pa55-word-that-must-not-leak"
	r := c.Post("/api/v2.0/users", userBody(map[string]any{"password": password}))
	wantStatus(t, r, http.StatusOK)
	id := r.Object(t)["id"].(string)

	var hash string
	var setAt time.Time
	err := env.DB.NewRaw("SELECT password_hash, password_updated_at FROM users WHERE public_id = ?", id).
		Scan(context.Background(), &hash, &setAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); err != nil {
		t.Fatalf("stored hash does not verify: %v", err)
	}
	if cost, _ := bcrypt.Cost([]byte(hash)); cost != bcrypt.DefaultCost {
		t.Fatalf("bcrypt cost %d", cost)
	}
	if ts := r.Object(t)["properties"].(map[string]any)["password_update_timestamp"]; ts != float64(setAt.UnixMilli()) {
		t.Fatalf("password_update_timestamp %v, stored %d", ts, setAt.UnixMilli())
	}

	bodies := []testenv.Response{r,
		c.Get("/api/v2.0/users/" + id),
		c.Get("/api/v2.0/users"),
		c.Patch("/api/v2.0/users/"+id, map[string]any{"password": password}),
		c.Post("/api/v2.0/users", userBody(map[string]any{"password": password, "email": "bad"})),
		c.Post("/api/v2.0/users", userBody(map[string]any{"password": password + strings.Repeat("x", 80)})),
	}
	for i, b := range bodies {
		for _, secret := range []string{password, hash, "password_hash", "$2a$"} {
			if bytes.Contains(b.Body, []byte(secret)) || strings.Contains(fmt.Sprint(b.Header), secret) {
				t.Fatalf("response %d exposes %q: %s", i, secret, b.Body)
			}
		}
	}
	if logs.Len() == 0 {
		t.Fatal("the test logger saw nothing: the assertion below would prove nothing")
	}
	if strings.Contains(logs.String(), password) || strings.Contains(logs.String(), hash) {
		t.Fatalf("the log holds the password or its hash:\n%s", logs.String())
	}
}
