package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// prismEnv names a Prism executable to use instead of the one .ci/node-tools installs.
const prismEnv = "SENSORAPI_PRISM"

// findPrism returns the prism executable: $SENSORAPI_PRISM, else the one .ci/node-tools
// installs into build/tools, else prism on the PATH. It skips the test, saying how to
// get it, when there is none or no node to run it.
func findPrism(t *testing.T) string {
	t.Helper()
	const how = "Prism not found: run .ci/node-tools (needs node and npm; make test does it) or set " + prismEnv
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip(how)
	}
	if p := os.Getenv(prismEnv); p != "" {
		return p
	}
	if p := filepath.Join(moduleRoot(t), "build", "tools", "node_modules", ".bin", "prism"); isExecutable(p) {
		return p
	}
	p, err := exec.LookPath("prism")
	if err != nil {
		t.Skip(how)
	}
	return p
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&0o111 != 0
}

// moduleRoot is the directory of go.mod, above the package the test runs in.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			t.Fatal("go.mod not found above the test's directory")
		}
	}
}

// startPrism runs `prism proxy docs/openapi.yaml upstream` on a free loopback port until
// the test ends and returns its URL. Without --errors Prism forwards every request, even
// one that breaks the document (the error cases send those on purpose), and reports
// what it found in the sl-violations header of the answer.
func startPrism(t *testing.T, upstream string) string {
	t.Helper()
	bin := findPrism(t)
	port := freePort(t)
	cmd := exec.Command(bin, "proxy", filepath.Join(moduleRoot(t), "docs", "openapi.yaml"), upstream,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--verboseLevel", "warn")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prism: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-exited // killed, as asked
		if t.Failed() {
			t.Logf("prism (%v), its output:\n%s", err, out.tail(4000))
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := awaitListening(addr, exited); err != nil {
		t.Fatalf("prism: %v\n%s", err, out.tail(4000))
	}
	return "http://" + addr
}

// awaitListening waits until addr accepts connections. Node starts slowly on a busy
// machine: the bound only stops a Prism that never comes up.
func awaitListening(addr string, exited <-chan error) error {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return nil
		}
	}
	return errors.New("not listening after 3 minutes")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a process's output, written from its own goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// violation is one entry of Prism's sl-violations header.
type violation struct {
	Location []string `json:"location"`
	Severity string   `json:"severity"`
	Code     any      `json:"code"`
	Message  string   `json:"message"`
}

func (v violation) in(where ...string) bool {
	if len(v.Location) < len(where) {
		return false
	}
	for i, w := range where {
		if v.Location[i] != w {
			return false
		}
	}
	return true
}

// violations decodes the sl-violations header of an answer relayed by Prism.
func violations(h http.Header) ([]violation, error) {
	raw := h.Get("sl-violations")
	if raw == "" {
		return nil, nil
	}
	var vs []violation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		return nil, fmt.Errorf("sl-violations %q: %w", raw, err)
	}
	return vs, nil
}

// Headers the contract test sends through Prism to the switch in front of the servers.
const (
	canaryHeader   = "X-Contract-Canary"   // answer this status with a body no schema accepts
	upstreamHeader = "X-Contract-Upstream" // the server to forward to (contractSwitch)
)

// canaryBody is a JSON body that no response schema of the document accepts: a
// validator that passes it with a documented status did not check that response.
const canaryBody = `{"contract_canary":true}`

// contractSwitch is Prism's upstream: it forwards each request to the server its
// X-Contract-Upstream header names ("" the first), except a request carrying
// X-Contract-Canary: STATUS, which it answers itself with that status and canaryBody.
func contractSwitch(t *testing.T, servers map[string]string) string {
	t.Helper()
	proxies := map[string]*httputil.ReverseProxy{}
	for name, raw := range servers {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		proxies[name] = httputil.NewSingleHostReverseProxy(u)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, err := strconv.Atoi(r.Header.Get(canaryHeader)); err == nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "canary")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(canaryBody))
			return
		}
		p := proxies[r.Header.Get(upstreamHeader)]
		if p == nil {
			http.Error(w, "unknown upstream", http.StatusBadGateway)
			return
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
