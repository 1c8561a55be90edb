package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

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
