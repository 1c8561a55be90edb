package openapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The validator fails an exchange that breaks the document, so a passing suite means
// something: a Device without its required fields, an undocumented status, a 404 body
// of the wrong shape on an unknown path, a missing X-Request-Id, an invalid request
// that the server accepted.
func TestValidatorRejects(t *testing.T) {
	v, err := NewValidator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path string
		status             int
		body               string
		noRequestID        bool
		requestBody        string
	}{
		{name: "missing fields", method: "GET", path: "/api/v2.0/devices/~kitchen", status: 200, body: `{"id":"5f1d3c0a9b8e7d6c5b4a3f2e"}`},
		{name: "undocumented status", method: "GET", path: "/api/v2.0/devices/~kitchen", status: 418, body: `{}`},
		{name: "wrong error code", method: "GET", path: "/api/v2.0/devices/~kitchen", status: 404, body: `{"code":400001,"message":"Not found.","detail":"x"}`},
		{name: "unknown path, bad body", method: "GET", path: "/nowhere", status: 404, body: `{"detail":"x"}`},
		{name: "unknown method, bad status", method: "PATCH", path: "/healthz", status: 404, body: `{"code":404001,"message":"Not found.","detail":"x"}`},
		{name: "no request id", method: "GET", path: "/healthz", status: 200, body: `{"status":"ok"}`, noRequestID: true},
		{name: "invalid request accepted", method: "POST", path: "/api/v1.6/collections/values", status: 201,
			body: `[{"status_code":201}]`, requestBody: `[{"value":1}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			req.Header.Set("X-Auth-Token", "t")
			req.Header.Set("Content-Type", "application/json")
			h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}
			if tc.noRequestID {
				h.Del("X-Request-Id")
			}
			x := Exchange{Request: req, RequestBody: []byte(tc.requestBody), Status: tc.status, Header: h,
				ResponseBody: []byte(tc.body)}
			err := v.Check(context.Background(), x)
			if err == nil {
				t.Fatal("the validator accepted it")
			}
			t.Log(err)
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
