package client

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/sensordata/sensorapi/pkg/openapi"
)

// The client was generated from the document as it is now: after a change to
// docs/openapi.yaml, `go generate ./docs/client` must run again.
func TestGeneratedFromTheDocument(t *testing.T) {
	embedded, err := GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	current, err := openapi.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, want := canonicalJSON(t, embedded), canonicalJSON(t, current)
	if !bytes.Equal(got, want) {
		t.Fatal("docs/openapi.yaml changed since the client was generated: run go generate ./docs/client")
	}
}

func canonicalJSON(t *testing.T, v json.Marshaler) []byte {
	t.Helper()
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(generic) // sorted keys
	if err != nil {
		t.Fatal(err)
	}
	return b
}
