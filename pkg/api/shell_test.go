package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const (
	body401001 = `{"code":401001,"message":"Authentication credentials were not provided.","detail":"Authentication credentials were not provided."}`
	body401002 = `{"code":401002,"message":"Incorrect authentication credentials.","detail":"Incorrect authentication credentials."}`
)

func TestAuthentication(t *testing.T) {
	c := env.Client(t)
	anon := c.As("")
	cases := []struct {
		name   string
		client *testenv.Client
		path   string
		header []string
		status int
		body   string
	}{
		{"no token", anon, "/api/v2.0/account", nil, 401, body401001},
		{"no token, trailing slash", anon, "/api/v2.0/account/", nil, 401, body401001},
		{"empty header", anon, "/api/v2.0/account", []string{"X-Auth-Token", ""}, 401, body401001},
		{"unknown token", c.As("nope-not-a-token"), "/api/v2.0/account", nil, 401, body401002},
		{"unknown token in query", anon, "/api/v2.0/account?token=nope", nil, 401, body401002},
		{"good token in query", anon, "/api/v2.0/account?token=" + env.AdminToken, nil, 200, `{"decimalPlaces":null,"name":"admin"}`},
		{"header wins over good query", c.As("bad"), "/api/v2.0/account?token=" + env.AdminToken, nil, 401, body401002},
		{"header wins over bad query", c, "/api/v2.0/account?token=bad", nil, 200, `{"decimalPlaces":null,"name":"admin"}`},
		{"v1.6 without token", anon, "/api/v1.6/anything", nil, 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.client.Do("GET", tc.path, nil, tc.header...)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.body != "" && string(r.Body) != tc.body {
				t.Fatalf("body\n got %s\nwant %s", r.Body, tc.body)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

func TestErrorBodies(t *testing.T) {
	cfg := env.Config()
	cfg.MaxBodyBytes = 64
	c := env.ClientWith(t, cfg)
	cases := []struct {
		name, method, path string
		body               any
		header             []string
		status             int
		want               string
	}{
		{"unknown path", "GET", "/nowhere", nil, nil, 404,
			`{"code":404001,"message":"Not found.","detail":"The path '/nowhere' was not found."}`},
		{"wrong method", "DELETE", "/healthz", nil, nil, 405, `{"code":405001,"message":"Method not allowed."}`},
		{"too large", "POST", "/api/v2.0/account", strings.Repeat("x", 65), nil, 413,
			`{"code":413001,"message":"Request body too large."}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Do(tc.method, tc.path, tc.body, tc.header...)
			if r.Status != tc.status || string(r.Body) != tc.want {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.want)
			}
			if r.Header.Get("X-Request-Id") == "" {
				t.Fatal("no X-Request-Id")
			}
		})
	}
}

func TestRequestIDEchoed(t *testing.T) {
	r := env.Client(t).Do("GET", "/healthz", nil, "X-Request-Id", "abc-123")
	if got := r.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("X-Request-Id %q", got)
	}
}

func TestOperationalRoutes(t *testing.T) {
	c := env.Client(t).As("")
	if r := c.Get("/healthz"); r.Status != 200 || r.Object(t)["status"] != "ok" ||
		!strings.HasPrefix(string(r.Body), `{"status":"ok","storage":{"bytes":`) {
		t.Fatalf("healthz %d %s", r.Status, r.Body)
	}
	if r := c.Get("/readyz"); r.Status != 200 || string(r.Body) != `{"status":"ready"}` {
		t.Fatalf("readyz %d %s", r.Status, r.Body)
	}
	c.Get("/api/v2.0/account") // a 401 to count
	r := c.Get("/metrics")
	if r.Status != http.StatusOK {
		t.Fatalf("metrics %d", r.Status)
	}
	for _, want := range []string{
		`sensorapi_http_requests_total{method="GET",route="/api/v2.0/account",status="401"} 1`,
		"sensorapi_db_pool_max_conns",
		"sensorapi_values_ingested_total",
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestRateLimitPerToken(t *testing.T) {
	cfg := env.Config()
	cfg.RateLimit, cfg.RateBurst = 0.05, 2 // a token every 20 s: none comes back during the test
	c := env.ClientWith(t, cfg)
	for i := range 2 {
		if r := c.Get("/api/v2.0/account"); r.Status != 200 {
			t.Fatalf("request %d within the burst: %d", i, r.Status)
		}
	}
	r := c.Get("/api/v2.0/account")
	if r.Status != 429 || r.Header.Get("Retry-After") != "20" ||
		string(r.Body) != `{"code":429001,"message":"Too many requests.","detail":"Rate limit exceeded: retry after 20 s."}` {
		t.Fatalf("over the limit: %d %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	// another token has its own bucket
	if r := c.As(env.NewAccount(t)).Get("/api/v2.0/account"); r.Status != 200 {
		t.Fatalf("other token: %d", r.Status)
	}
	// off by default
	d := env.Client(t)
	for range 20 {
		if r := d.Get("/api/v2.0/account"); r.Status != 200 {
			t.Fatalf("default config limited: %d", r.Status)
		}
	}
}

// TestSecretsStayOutOfLogsAndMetrics: tokens sent in the header or the query string,
// valid or not, never reach the log or the metrics.
func TestSecretsStayOutOfLogsAndMetrics(t *testing.T) {
	var logs bytes.Buffer
	c := env.Client(t)
	c.Server.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	bad := "wrong-token-SECRET-0123456789abcdef"
	c.Get("/api/v2.0/account?token=" + env.AdminToken)
	c.Get("/api/v2.0/account?token=" + bad)
	c.As(bad).Get("/api/v2.0/account")
	c.Get("/nowhere?token=" + env.AdminToken)
	c.Post("/api/v1.6/devices/logs/?token="+env.AdminToken, `{"x": "not a number"}`)
	metrics := c.As("").Get("/metrics")
	for _, secret := range []string{env.AdminToken, bad} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a token reached the log:\n%s", logs.String())
		}
		if strings.Contains(string(metrics.Body), secret) {
			t.Errorf("a token reached the metrics")
		}
	}
	if !strings.Contains(logs.String(), `"path":"/api/v2.0/account"`) {
		t.Fatalf("requests were not logged at all:\n%s", logs.String())
	}
}
