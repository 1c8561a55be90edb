package openapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The validator fails a response that breaks the document, so a passing suite means
// something: a Device without its required fields, an undocumented status, a 404 body
// of the wrong shape on an unknown path.
func TestValidatorRejects(t *testing.T) {
	v, err := NewValidator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"missing fields", "GET", "/api/v2.0/devices/~kitchen", 200, `{"id":"5f1d3c0a9b8e7d6c5b4a3f2e"}`},
		{"undocumented status", "GET", "/api/v2.0/devices/~kitchen", 418, `{}`},
		{"wrong error code", "GET", "/api/v2.0/devices/~kitchen", 404, `{"code":400001,"message":"Not found.","detail":"x"}`},
		{"unknown path, bad body", "GET", "/nowhere", 404, `{"detail":"x"}`},
		{"unknown method, bad status", "PATCH", "/healthz", 404, `{"code":404001,"message":"Not found.","detail":"x"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			req.Header.Set("X-Auth-Token", "t")
			h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}
			x := Exchange{Request: req, Status: tc.status, Header: h, ResponseBody: []byte(tc.body)}
			if err := v.Check(context.Background(), x); err == nil {
				t.Fatal("the validator accepted it")
			}
		})
	}
}

// A conforming exchange passes and is counted.
func TestValidatorAccepts(t *testing.T) {
	v, err := NewValidator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}
	for _, x := range []Exchange{
		{Request: httptest.NewRequest("GET", "/healthz/", nil), Status: 200, Header: h, ResponseBody: []byte(`{"status":"ok"}`)},
		{Request: httptest.NewRequest("GET", "/nowhere", nil), Status: 404, Header: h,
			ResponseBody: []byte(`{"code":404001,"message":"Not found.","detail":"The path '/nowhere' was not found."}`)},
		{Request: httptest.NewRequest("DELETE", "/healthz", nil), Status: 405, Header: h,
			ResponseBody: []byte(`{"code":405001,"message":"Method not allowed."}`)},
	} {
		if err := v.Check(context.Background(), x); err != nil {
			t.Errorf("%s %s: %v", x.Request.Method, x.Request.URL.Path, err)
		}
	}
	if v.Validated() != 3 {
		t.Fatalf("validated %d, want 3", v.Validated())
	}
}
