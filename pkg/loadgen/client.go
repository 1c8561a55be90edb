package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// Client sends requests to a running server with a token, for the load generator,
// the benchmarks and the load test.
type Client struct {
	HTTP  *http.Client
	URL   string // server root, e.g. http://127.0.0.1:8080
	Token string
}

// Do sends one request (a non-empty body as JSON); any status but 2xx is an error.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) error {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("X-Auth-Token", c.Token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("%s %s: %d %.200s", method, path, resp.StatusCode, b)
	case err != nil:
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return nil
}

// PostBatch sends a batch to the device route, /api/v1.6/devices/<device>/.
func (c *Client) PostBatch(ctx context.Context, b Batch) error {
	return c.Do(ctx, http.MethodPost, "/api/v1.6/devices/"+b.Device+"/", DeviceBody(b))
}
