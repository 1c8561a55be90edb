// Package client is a Go client of the service, generated from docs/openapi.yaml by
// oapi-codegen as any user of the API would generate one: docs/client.md shows how
// to use it. `go generate ./docs/client` generates it again (it needs the Go module
// proxy the first time); a test fails when the document changed since.
package client

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../openapi.yaml
