package events

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDialGuardRefusesPrivateTargets: the webhooks' HTTP client refuses to connect
// to a loopback address at dial time (after resolution), whatever name led there,
// unless private targets are allowed; so a name that resolved to a public address
// when the event was created cannot be rebound to a private one.
func TestDialGuardRefusesPrivateTargets(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer srv.Close()
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", u, nil)
		resp, err := newHTTPClient(false).Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if !errors.Is(err, errBlocked) {
			t.Fatalf("%s: error %v, want the guard's", u, err)
		}
	}
	if hits != 0 {
		t.Fatalf("the receiver was reached %d times", hits)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL, nil)
	resp, err := newHTTPClient(true).Do(req)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	_ = resp.Body.Close()
	if hits != 1 {
		t.Fatalf("allowed: %d hits", hits)
	}
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://10.0.0.1/x", "http://169.254.169.254/", "http://localhost:80/", "http://a.localhost/",
		"http://[::1]:8080/", "ftp://example.com/", "/relative", "http://"} {
		if checkURL(ctx, u, false) == "" {
			t.Errorf("%s accepted", u)
		}
	}
	if msg := checkURL(ctx, "http://10.0.0.1/x", true); msg != "" {
		t.Errorf("allowed private: %s", msg)
	}
	if msg := checkURL(ctx, "https://93.184.216.34/hook", false); msg != "" {
		t.Errorf("public address refused: %s", msg)
	}
}
