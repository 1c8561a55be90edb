package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/openapi"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// GET /openapi.json serves the embedded document as JSON, without a token.
func TestOpenAPIServed(t *testing.T) {
	r := env.Client(t).As("").Get("/openapi.json/")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q", r.Status, r.Header.Get("Content-Type"))
	}
	want, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Body, want) {
		t.Fatal("served document differs from docs/openapi.yaml")
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil || doc.OpenAPI != "3.0.3" || doc.Paths["/api/v2.0/devices/"] == nil {
		t.Fatalf("not the OpenAPI document (%v): %.200s", err, r.Body)
	}
}

var ginParam = regexp.MustCompile(`[:*]([A-Za-z_]+)`)

// Every route the engine serves is in the document, and every documented operation is
// served: a route added without documentation fails here. The engine registers routes
// without a trailing slash and answers both spellings; the document spells each path as
// the platform's clients do, so paths are compared without it.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc, err := openapi.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+strings.TrimSuffix(path, "/"))
		}
	}
	var served []string
	for _, r := range env.Client(t).Server.Routes() {
		served = append(served, r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("route %s is not in docs/openapi.yaml", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("docs/openapi.yaml documents %s, which no route serves", op)
		}
	}
	if len(served) < 40 {
		t.Fatalf("only %d routes listed", len(served))
	}
}

// The client validated the requests it sent (testenv hooks the validator into Do).
func TestOpenAPIClientValidates(t *testing.T) {
	before := testenv.Validated()
	env.Client(t).Get("/healthz")
	if testenv.Validated() != before+1 {
		t.Fatalf("validated %d → %d responses", before, testenv.Validated())
	}
}
