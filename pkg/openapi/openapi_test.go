package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sensordata/sensorapi/docs"
)

func TestLoadAndJSON(t *testing.T) {
	doc, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatalf("JSON(): %v", err)
	}
	paths, _ := m["paths"].(map[string]any)
	if len(paths) != doc.Paths.Len() || len(paths) == 0 {
		t.Fatalf("JSON has %d paths, the document %d", len(paths), doc.Paths.Len())
	}
}

// Examples are checked against their schemas when the document loads.
func TestParseRejectsBadExample(t *testing.T) {
	bad := bytes.Replace(docs.OpenAPI, []byte("example: {mean: 21.5}"), []byte("example: {mean: 'high'}"), 1)
	if bytes.Equal(bad, docs.OpenAPI) {
		t.Fatal("example not found")
	}
	if _, err := parse(context.Background(), bad); err == nil {
		t.Fatal("an invalid example passed")
	}
}

// Every operation shows at least one example, in its request body or a response.
func TestEveryOperationHasAnExample(t *testing.T) {
	doc, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !hasExample(op) {
				t.Errorf("%s %s has no example", method, path)
			}
		}
	}
}

func hasExample(op *openapi3.Operation) bool {
	contents := []openapi3.Content{}
	if op.RequestBody != nil {
		contents = append(contents, op.RequestBody.Value.Content)
	}
	for _, r := range op.Responses.Map() {
		contents = append(contents, r.Value.Content)
	}
	for _, c := range contents {
		for _, mt := range c {
			if mt.Example != nil || len(mt.Examples) > 0 {
				return true
			}
		}
	}
	return false
}

// The document spells each path as the platform's clients send it, which is how the
// contract (API.md, from the platform's documentation) spells it: generated clients and
// spec-driven proxies match paths exactly, slash included. The server answers both.
func TestPathsSpelledAsTheContract(t *testing.T) {
	doc, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/api/v2.0/users/", "/api/v2.0/users/{key}", "/api/v2.0/users/{key}/_/assign_organizations/",
		"/api/v2.0/organizations/", "/api/v2.0/devices/", "/api/v2.0/devices/{device}/",
		"/api/v2.0/devices/{device}/variables/", "/api/v2.0/devices/{device}/variables/{variable}/",
		"/api/v2.0/variables/", "/api/v2.0/variables/{variable}/",
		"/api/v2.0/tokens/", "/api/v2.0/tokens/{id}", "/api/v2.0/devices/{device}/tokens/",
		"/api/v2.0/devices/{device}/tokens/{id}", "/api/v2.0/events/", "/api/v2.0/events/{event}",
		"/api/v2.0/events/{event}/deliveries/", "/api/v2.0/data/statistics/",
		"/api/v1.6/devices/{device}/", "/api/v1.6/devices/{device}/{variable}/values",
		"/api/v1.6/devices/{device}/{variable}/lv", "/api/v1.6/variables/{id}/values",
		"/api/v1.6/variables/{id}/values/{start}/{end}", "/api/v1.6/variables/{id}/statistics/{agg}/{start}/{end}",
		"/api/v1.6/collections/values", "/api/v1.6/data/stats/resample/", "/api/v1.6/data/stats/aggregation/",
		"/healthz", "/readyz", "/metrics", "/console/",
	} {
		if doc.Paths.Value(path) == nil {
			t.Errorf("no path %s in the document (spelled otherwise?)", path)
		}
	}
}
