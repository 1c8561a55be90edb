package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientSendsTokenJSONAndChecksStatus(t *testing.T) {
	var got struct{ path, token, ctype, body string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.path, got.token, got.ctype, got.body = r.URL.Path, r.Header.Get("X-Auth-Token"), r.Header.Get("Content-Type"), string(b)
		if strings.HasSuffix(r.URL.Path, "/fail") {
			http.Error(w, `{"code":400001}`, http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), URL: srv.URL, Token: "tok"}
	b := Batch{Device: "device-0", Dots: nil}
	spec := Spec{Devices: 1, Variables: 1, Points: 1, Start: time.Unix(0, 0), Interval: time.Second, Batch: 1}
	_ = spec.Batches(func(x Batch) error { b = x; return nil })
	if err := c.PostBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if got.path != "/api/v1.6/devices/device-0/" || got.token != "tok" || got.ctype != "application/json" ||
		got.body != string(DeviceBody(b)) {
		t.Fatalf("sent %+v", got)
	}
	if err := c.Do(context.Background(), "GET", "/x", nil); err != nil || got.ctype != "" {
		t.Fatalf("GET: %v, Content-Type %q", err, got.ctype)
	}
	if err := c.Do(context.Background(), "POST", "/fail", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a 400 must be an error: %v", err)
	}
}
