package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/openapi"
	"github.com/sensordata/sensorapi/pkg/server"
	"github.com/sensordata/sensorapi/pkg/store"
)

// validator checks every exchange of every Client against docs/openapi.yaml.
var validator = sync.OnceValues(func() (*openapi.Validator, error) {
	return openapi.NewValidator(context.Background())
})

// Validated is how many responses the clients of this test binary have checked
// against the OpenAPI document.
func Validated() int64 {
	v, err := validator()
	if err != nil {
		return 0
	}
	return v.Validated()
}

// Unexercised lists the documented operations that no client of this test binary saw
// succeed (see openapi.Validator.Unexercised).
func Unexercised() []string {
	v, err := validator()
	if err != nil {
		return []string{"(validator: " + err.Error() + ")"}
	}
	return v.Unexercised()
}

// Client sends real HTTP requests to the real Gin engine served on loopback.
type Client struct {
	URL    string
	Token  string // sent as X-Auth-Token unless empty
	Server *server.Instance
	t      testing.TB

	offContract bool // see OffContract
}

// Response is what a request returned.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r Response) JSON(t testing.TB) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.Body)
	}
	return v
}

// Object decodes the body as a JSON object.
func (r Response) Object(t testing.TB) map[string]any {
	t.Helper()
	m, ok := r.JSON(t).(map[string]any)
	if !ok {
		t.Fatalf("body is not a JSON object: %s", r.Body)
	}
	return m
}

// Config returns the test server configuration: the defaults, with caches that never
// expire within a test (longer than Patience), so that a test waiting for another
// instance to see a change proves the change was notified, not merely timed out.
func (e *Env) Config() config.Config {
	c := config.Defaults()
	c.CacheTTL = 10 * Patience
	return c
}

// Client starts the service on a loopback listener and returns a client holding the
// admin token. The server stops when the test ends.
func (e *Env) Client(t testing.TB) *Client {
	t.Helper()
	return e.ClientWith(t, e.Config())
}

// ClientWith is Client with a given configuration.
func (e *Env) ClientWith(t testing.TB, cfg config.Config) *Client {
	t.Helper()
	return e.Serve(t, e.DB, cfg)
}

// Instance starts another instance of the service on the same database, as a second
// `serve` process would be: its own connection pool, notification listener, caches and
// ingestion pipeline. It is ready (listening for invalidations) when it returns.
func (e *Env) Instance(t testing.TB) *Client {
	t.Helper()
	db, err := store.Open(context.Background(), e.DSN, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return e.Serve(t, db, e.Config())
}

// Serve runs a server on db (a handle of the test's own, e.g. with another statement
// timeout) until the test ends, once its listener is up.
func (e *Env) Serve(t testing.TB, db *store.DB, cfg config.Config) *Client {
	t.Helper()
	c, _ := e.ServeStoppable(t, db, cfg)
	return c
}

// ServeStoppable is Serve with a function that stops the instance before the test
// ends, as a killed process would stop (its context cancelled: HTTP closed, every
// goroutine of the instance stopped); it returns once all have (Instance.Done).
func (e *Env) ServeStoppable(t testing.TB, db *store.DB, cfg config.Config) (*Client, func()) {
	t.Helper()
	srv, url, halt, err := e.Start(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(halt)
	return &Client{URL: url, Token: e.AdminToken, Server: srv, t: t}, halt
}

// Start runs an instance of the service on db, served on a loopback listener at url,
// until stop, and returns once its notification listener is up. Tests use Serve;
// Examples, which have no *testing.T, use this.
func (e *Env) Start(db *store.DB, cfg config.Config) (srv *server.Instance, url string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err = server.Start(ctx, db, cfg, e.Log)
	if err != nil {
		cancel()
		return nil, "", nil, fmt.Errorf("start the service: %w", err)
	}
	ts := httptest.NewServer(srv.Handler())
	var once sync.Once
	stop = func() { once.Do(func() { ts.Close(); cancel(); <-srv.Done() }) }
	for deadline := time.Now().Add(10 * time.Second); !srv.Listener.Healthy(); {
		if time.Now().After(deadline) {
			stop()
			return nil, "", nil, errors.New("the notification listener did not connect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return srv, ts.URL, stop, nil
}

// As returns a copy of the client that sends another token.
func (c *Client) As(token string) *Client {
	cp := *c
	cp.Token = token
	return &cp
}

// In returns a copy of the client that reports to t, a subtest of the one it was made
// for, so that a failed check names the subtest.
func (c *Client) In(t testing.TB) *Client {
	cp := *c
	cp.t = t
	return &cp
}

// OffContract returns a copy of the client for requests that are deliberately outside
// docs/openapi.yaml yet tolerated by the server (hostile input, malformed page numbers):
// their responses are still validated, the requests are not.
func (c *Client) OffContract() *Client {
	cp := *c
	cp.offContract = true
	return &cp
}

// Do sends a request. body may be nil, a string or []byte (sent as is), or any other
// value (sent as JSON).
func (c *Client) Do(method, path string, body any, header ...string) Response {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatalf("marshal body: %v", err)
		}
		raw = j
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.URL+path, r)
	if err != nil {
		c.t.Fatalf("new request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("X-Auth-Token", c.Token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	c.validate(openapi.Exchange{Request: req, RequestBody: raw, Status: resp.StatusCode, Header: resp.Header,
		ResponseBody: b, OffContract: c.offContract})
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// validate fails the test when the exchange does not match the OpenAPI document.
func (c *Client) validate(x openapi.Exchange) {
	c.t.Helper()
	v, err := validator()
	if err != nil {
		c.t.Fatalf("openapi validator: %v", err)
	}
	if err := v.Check(context.Background(), x); err != nil {
		c.t.Errorf("openapi: %s %s → %d does not match docs/openapi.yaml: %v\nresponse: %.500s",
			x.Request.Method, x.Request.URL.RequestURI(), x.Status, err, x.ResponseBody)
	}
}

// Get, Post, Patch and Delete are shorthands of Do.
func (c *Client) Get(path string) Response { c.t.Helper(); return c.Do("GET", path, nil) }

func (c *Client) Post(path string, body any) Response { c.t.Helper(); return c.Do("POST", path, body) }

func (c *Client) Patch(path string, body any) Response {
	c.t.Helper()
	return c.Do("PATCH", path, body)
}

func (c *Client) Delete(path string) Response { c.t.Helper(); return c.Do("DELETE", path, nil) }

// VariableID reads a variable's public id through the API.
func (c *Client) VariableID(device, variable string) string {
	c.t.Helper()
	r := c.Get("/api/v2.0/devices/~" + device + "/variables/~" + variable)
	if r.Status != http.StatusOK {
		c.t.Fatalf("variable %s/%s: %d %s", device, variable, r.Status, r.Body)
	}
	return r.Object(c.t)["id"].(string)
}

// NewToken creates a token through a token route (API.md §13) and returns its secret.
func (c *Client) NewToken(path string, body any) string {
	c.t.Helper()
	r := c.Post(path, body)
	if r.Status != http.StatusCreated {
		c.t.Fatalf("create token at %s: %d %s", path, r.Status, r.Body)
	}
	return r.Object(c.t)["token"].(string)
}
