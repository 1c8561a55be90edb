// Package openapi serves the API reference (docs/openapi.yaml) and checks real requests
// and responses against it, so the document cannot drift from the code.
package openapi

import (
	"context"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"

	"github.com/sensordata/sensorapi/docs"
)

// JSON returns the document as JSON, as GET /openapi.json serves it.
func JSON() ([]byte, error) {
	j, err := yaml.YAMLToJSON(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("openapi: convert the document to JSON: %w", err)
	}
	return j, nil
}

// Load parses the document and checks that it is valid OpenAPI 3, examples included.
func Load(ctx context.Context) (*openapi3.T, error) { return parse(ctx, docs.OpenAPI) }

func parse(ctx context.Context, data []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi: load the document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("openapi: invalid document: %w", err)
	}
	return doc, nil
}
