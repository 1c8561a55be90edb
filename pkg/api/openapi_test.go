package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/openapi"
	"github.com/sensordata/sensorapi/pkg/testenv"
)

// GET /openapi.json serves the embedded document as JSON, without a token.
func TestOpenAPIServed(t *testing.T) {
	r := env.Client(t).As("").Get("/openapi.json")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q", r.Status, r.Header.Get("Content-Type"))
	}
	want, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	_ = json.Unmarshal(want, &exp)
	if !jsonEqual(got, exp) {
		t.Fatal("served document differs from docs/openapi.yaml")
	}
	if got.(map[string]any)["openapi"] != "3.0.3" {
		t.Fatalf("openapi version %v", got.(map[string]any)["openapi"])
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

var ginParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// Every route the engine serves is in the document, and every documented operation is
// served: a route added without documentation fails here.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc, err := openapi.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
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
