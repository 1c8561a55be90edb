package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConsoleServed: the console's page and files come from the binary, without a
// token, with a policy that keeps the page to this server.
func TestConsoleServed(t *testing.T) {
	c := env.Client(t).As("")
	for path, want := range map[string]string{
		"/console":           `<script type="module" src="/console/app.js">`,
		"/console/":          `<script type="module" src="/console/app.js">`,
		"/console/app.js":    `import uPlot from "/console/vendor/uplot/uPlot.esm.js"`,
		"/console/style.css": "#chart",
	} {
		r := c.Get(path)
		if r.Status != 200 || !strings.Contains(string(r.Body), want) {
			t.Errorf("%s: %d %.100s", path, r.Status, r.Body)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	if r := c.Get("/console/nope.js"); r.Status != 404 {
		t.Errorf("a missing file: %d", r.Status)
	}
	// a vendored file, deeper than one path segment (which OpenAPI cannot describe)
	resp, err := http.Get(c.URL + "/console/vendor/uplot/uPlot.esm.js")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(b), "export { uPlot as default }") {
		t.Errorf("uPlot: %d", resp.StatusCode)
	}
}
