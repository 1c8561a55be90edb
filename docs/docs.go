// Package docs embeds the API reference, so the server and the tests share one copy.
package docs

import _ "embed" // for go:embed

// OpenAPI is docs/openapi.yaml, the OpenAPI 3 document of every route.
//
//go:embed openapi.yaml
var OpenAPI []byte
