package api_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sensordata/sensorapi/pkg/testenv"
)

// freshClient is a client of a new account, so counts and labels of one test never
// see another test's rows.
func freshClient(t testing.TB) (*testenv.Client, string) {
	t.Helper()
	tok := env.NewAccount(t)
	return env.Client(t).As(tok), tok
}

// accountID is the internal id of the account holding token.
func accountID(t testing.TB, token string) int64 {
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
func exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := env.DB.NewRaw(query, args...).Exec(context.Background()); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count runs a count query on the test database.
func count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.DB.NewRaw(query, args...).Scan(context.Background(), &n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// newOrganization inserts an Organization of the token's account and returns its id.
func newOrganization(t *testing.T, token, label, name string) string {
	t.Helper()
	var id string
	err := env.DB.NewRaw(`INSERT INTO organizations (account_id, label, name) VALUES (?, ?, ?) RETURNING public_id`,
		accountID(t, token), label, name).Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("insert organization: %v", err)
	}
	return id
}

// expect asserts the status and returns the body as an object.
func expect(t testing.TB, r testenv.Response, status int) map[string]any {
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
func labels(t *testing.T, body map[string]any) []string {
	t.Helper()
	out := []string{}
	for _, r := range body["results"].([]any) {
		out = append(out, r.(map[string]any)["label"].(string))
	}
	return out
}

// field reads a nested field of a decoded body: field(m, "organization", "id").
func field(m map[string]any, path ...string) any {
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

func str(m map[string]any, path ...string) string { s, _ := field(m, path...).(string); return s }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
