package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
)

const bulkPath = "/api/v2.0/devices/_/bulk/create/"

// deviceCount counts the account's Devices whose label starts with prefix.
func deviceCount(t *testing.T, tok, prefix string) int {
	t.Helper()
	return sqlCount(t, `SELECT count(*) FROM devices WHERE account_id = ? AND label LIKE ?`, accountIDOf(t, tok), prefix+"%")
}

// detailKeys are the fields a 400001 names, sorted.
func detailKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var e struct {
		Code   int                 `json:"code"`
		Detail map[string][]string `json:"detail"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code != 400001 {
		t.Fatalf("not a 400001: %s", body)
	}
	keys := make([]string, 0, len(e.Detail))
	for k := range e.Detail {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestBulkCreateDevices: a list of E3 bodies creates every Device, in order, with E3's
// defaults and Organization keys; a bad item, a label the list repeats or one the
// account has refuses the whole list naming "<index>.<field>", and creates nothing;
// 10,000 items are taken, 10,001 (and none) refused.
func TestBulkCreateDevices(t *testing.T) {
	c, tok := freshClient(t)
	insertOrganization(t, tok, "acme", "Acme")
	r := c.Post(bulkPath, []any{
		map[string]any{"label": "B-Kitchen", "tags": []any{"home"}, "organization": "~acme"},
		map[string]any{"label": "b-garage", "name": "Garage", "isActive": false, "properties": map[string]any{"_color": "#fff"}},
		map[string]any{"label": "b-attic", "organization": "~acme"},
	})
	if r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var got []map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil || len(got) != 3 {
		t.Fatalf("%v %s", err, r.Body)
	}
	for i, want := range []string{"b-kitchen", "b-garage", "b-attic"} {
		one := expectStatus(t, c.Get("/api/v2.0/devices/"+jsonString(got[i], "id")+"/"), 200)
		if jsonString(got[i], "label") != want || !reflect.DeepEqual(one, got[i]) {
			t.Errorf("item %d: %v, GET %v", i, got[i], one)
		}
	}
	if jsonString(got[0], "organization", "label") != "acme" || got[1]["isActive"] != false || jsonString(got[2], "name") != "b-attic" {
		t.Errorf("fields not applied as E3 does: %v", got)
	}

	bad := []any{
		map[string]any{"label": "c-one"},
		map[string]any{"label": "not a label"},
		map[string]any{"label": "c-two", "properties": map[string]any{"_color": "red"}},
		map[string]any{"label": "C-ONE"},
		"not an object",
		map[string]any{"name": "no label", "organization": "~nowhere"},
	}
	r = c.Post(bulkPath, bad)
	want := []string{"1.label", "2.properties._color", "3.label", "4", "5.label", "5.organization"}
	if r.Status != 400 || !reflect.DeepEqual(detailKeys(t, r.Body), want) {
		t.Fatalf("%d %s, want errors on %v", r.Status, r.Body, want)
	}
	// a label the account has: valid bodies, yet nothing is created
	r = c.Post(bulkPath, []any{map[string]any{"label": "c-new"}, map[string]any{"label": "b-garage"}, map[string]any{"label": "c-newer"}})
	if r.Status != 400 || !reflect.DeepEqual(detailKeys(t, r.Body), []string{"1.label"}) {
		t.Fatalf("existing label: %d %s", r.Status, r.Body)
	}
	if n := deviceCount(t, tok, "c-"); n != 0 {
		t.Fatalf("%d Devices created by refused lists", n)
	}

	many := make([]any, 10_001)
	for i := range many {
		many[i] = map[string]any{"label": fmt.Sprintf("m-%05d", i)}
	}
	for _, list := range [][]any{many, {}} {
		if r := c.Post(bulkPath, list); r.Status != 400 || !reflect.DeepEqual(detailKeys(t, r.Body), []string{"body"}) {
			t.Fatalf("%d items: %d %.200s", len(list), r.Status, r.Body)
		}
	}
	if n := deviceCount(t, tok, "m-"); n != 0 {
		t.Fatalf("%d Devices of a refused list of 10,001", n)
	}
	r = c.Post(bulkPath, many[:10_000])
	if err := json.Unmarshal(r.Body, &got); r.Status != 201 || err != nil || len(got) != 10_000 ||
		jsonString(got[9_999], "label") != "m-09999" || deviceCount(t, tok, "m-") != 10_000 {
		t.Fatalf("10,000 items: %d, %d created", r.Status, deviceCount(t, tok, "m-"))
	}
}
