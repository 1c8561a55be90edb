package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// the serve processes of these tests share one database whose old rows other tests
	// count: no packing behind their backs (TestStoragePack packs on purpose)
	if err := os.Setenv("SENSORAPI_PACK_AFTER", "off"); err != nil {
		panic(err)
	}
	os.Exit(testenv.Run(m, &env))
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sensorapi")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// TestTwoInstancesServeOneDatabase: two `sensorapi serve` processes started together on
// the same database both come up (migrations under the advisory lock), answer /readyz,
// accept the admin token, and exit 0 on SIGTERM.
func TestTwoInstancesServeOneDatabase(t *testing.T) {
	bin := buildBinary(t)
	const token = "two-instances-admin-token-0123456789"
	var procs []*exec.Cmd
	var addrs []string
	for range 2 {
		addr := freeAddr(t)
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN, "SENSORAPI_ADDR="+addr, "SENSORAPI_ADMIN_TOKEN="+token,
			"SENSORAPI_MQTT_ADDR="+freeAddr(t), "SENSORAPI_CACHE_TTL="+(10*testenv.Patience).String())
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			if t.Failed() {
				t.Logf("%s logs:\n%s", addr, logs.String())
			}
		})
		procs, addrs = append(procs, cmd), append(addrs, addr)
	}
	for _, addr := range addrs {
		waitReady(t, "http://"+addr)
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v2.0/account", nil)
		req.Header.Set("X-Auth-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: admin token: %v %v", addr, resp, err)
		}
		_ = resp.Body.Close()
	}
	revokeAcrossProcesses(t, addrs[0], addrs[1], token)
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(35 * time.Second):
			t.Fatal("no exit within 35 s of SIGTERM")
		}
	}
}

// revokeAcrossProcesses: a token created and then deleted through process a answers
// 401002 from process b, which had it cached for longer than the test waits (so the
// revocation was notified, not timed out).
func revokeAcrossProcesses(t *testing.T, a, b, admin string) {
	t.Helper()
	do := func(addr, method, path, tok, body string) (int, string) {
		return httpDo(t, "http://"+addr, method, path, tok, body)
	}
	status, body := do(a, "POST", "/api/v2.0/tokens/", admin, `{"label":"across","scope":"read"}`)
	var created struct{ ID, Token string }
	if err := json.Unmarshal([]byte(body), &created); status != 201 || err != nil {
		t.Fatalf("create token: %d %s", status, body)
	}
	for range 2 { // cached on b
		if status, _ := do(b, "GET", "/api/v2.0/devices/", created.Token, ""); status != 200 {
			t.Fatalf("b before: %d", status)
		}
	}
	if status, body := do(a, "DELETE", "/api/v2.0/tokens/"+created.ID, admin, ""); status != 204 {
		t.Fatalf("delete on a: %d %s", status, body)
	}
	testenv.Eventually(t, "process b refuses the token deleted through a", func() bool {
		status, body := do(b, "GET", "/api/v2.0/devices/", created.Token, "")
		return status == 401 && strings.Contains(body, "401002")
	})
}

// httpDo sends a JSON request with a token to a running server and returns the status
// and body.
func httpDo(t *testing.T, base, method, path, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	// A hang detector, not a timing bound: on a loaded 2-core machine (make test runs
	// two packages at a time, each with its database) a server took more than 60 s to
	// answer ready after printing its token.
	const patience = 3 * time.Minute
	deadline := time.Now().Add(patience)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready within %v; last answer: %s", url, patience, last)
}

// TestAccountCreatePrintsOnlyToken: stdout is the token alone, usable at once.
func TestAccountCreatePrintsOnlyToken(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	run := func(args ...string) string { return runCLI(t, bin, args...) }
	for _, out := range []string{run("account", "create", "cli-acme"), run("token", "create", "--account", "cli-acme")} {
		tok := strings.TrimSuffix(out, "\n")
		if len(tok) < 32 || strings.ContainsAny(tok, " \n\t") {
			t.Fatalf("stdout %q is not a lone token", out)
		}
		var name string
		err := env.DB.NewRaw(`SELECT a.name FROM tokens t JOIN accounts a ON a.id = t.account_id
			WHERE t.hash = sha256(convert_to(?, 'UTF8'))`, tok).Scan(ctx, &name)
		if err != nil || name != "cli-acme" {
			t.Fatalf("token %q belongs to %q (%v)", tok, name, err)
		}
	}
}

// runCLI runs the binary on the test database and returns its stdout.
func runCLI(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out)
}

// TestTokenCLI: a device token is created for a device, listed with it, and revoked
// by its id.
func TestTokenCLI(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	run := func(args ...string) string { return runCLI(t, bin, args...) }
	if _, err := env.DB.ExecContext(ctx, `INSERT INTO devices (account_id, label, name)
		SELECT id, 'cli-dev', 'cli-dev' FROM accounts WHERE name = 'admin'`); err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(run("token", "create", "--scope", "device", "--device", "cli-dev", "--label", "fw"))
	var id, scope, device string
	err := env.DB.NewRaw(`SELECT t.public_id, t.scope, d.label FROM tokens t JOIN devices d ON d.id = t.device_id
		WHERE t.hash = sha256(convert_to(?, 'UTF8'))`, secret).Scan(ctx, &id, &scope, &device)
	if err != nil || scope != "device" || device != "cli-dev" {
		t.Fatalf("created token: %s %s (%v)", scope, device, err)
	}
	if out := run("token", "list", "--device", "cli-dev"); !strings.Contains(out, id) || !strings.Contains(out, "device") ||
		strings.Contains(out, secret) {
		t.Fatalf("token list:\n%s", out)
	}
	run("token", "revoke", id)
	var n int
	if err := env.DB.NewRaw(`SELECT count(*) FROM tokens WHERE public_id = ?`, id).Scan(ctx, &n); err != nil || n != 0 {
		t.Fatalf("%d tokens left after revoke (%v)", n, err)
	}
}

// TestHelpOnEverySubcommand: `help` and `--help` on each subcommand print a usage with
// an example and exit 0.
func TestHelpOnEverySubcommand(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "help").Output()
	if err != nil || !strings.Contains(string(out), "Usage:") {
		t.Fatalf("help: %v %s", err, out)
	}
	// "account create --help" once created an account named "--help"; without
	// DATABASE_URL a command that reaches the database fails instead of exiting 0
	for _, args := range [][]string{{"serve"}, {"migrate"}, {"account"}, {"account", "create"}, {"token"},
		{"token", "create"}, {"load"}, {"compile"}, {"healthcheck"}, {"rollups"}, {"rollups", "rebuild"}, {"rollups", "check"},
		{"retention"}, {"retention", "run"}} {
		cmd := exec.Command(bin, append(args, "--help")...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage: sensorapi "+args[0]) || !strings.Contains(string(out), "Example") {
			t.Errorf("%v --help: %v\n%s", args, err, out)
		}
	}
}

// TestRollupsRebuild: the command puts back a minute rollup that went missing (a value
// written around the write path) and refuses a bad --since.
func TestRollupsRebuild(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	s := env.Seed(t, env.AdminToken, "rebuild-cli", "v", []testenv.Point{{TS: 1_767_225_600_000, Value: 1}})
	if _, err := env.DB.ExecContext(ctx, `INSERT INTO "values" (variable_id, ts, value) VALUES (?, '2026-01-01T00:05:00Z', 2)`,
		s.VariableKey); err != nil {
		t.Fatal(err)
	}
	minutes := func() (n int) {
		if err := env.DB.NewRaw(`SELECT count(*) FROM value_minutes WHERE variable_id = ?`, s.VariableKey).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := minutes(); n != 1 {
		t.Fatalf("%d rollups before the rebuild, want the seeded one", n)
	}
	check := func() (string, error) {
		c := exec.Command(bin, "rollups", "check", "--since", "2026-01-01T00:00:00Z")
		c.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err == nil || !strings.Contains(out, "value_minutes tile 2026-01-01T00:05:00Z: 1 values, rollup counts no") {
		t.Fatalf("rollups check missed the minute written around the write path: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "rollups", "rebuild", "--since", "2026-01-01T00:00:00Z")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rollup tiers rebuilt") {
		t.Fatalf("rollups rebuild: %v\n%s", err, out)
	}
	// the step is reported as it starts and ends (pkg/progress adds a line every 10 s)
	for _, want := range []string{"] rebuilding the rollup tiers…", "] rebuilding the rollup tiers: done in"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rollups rebuild printed no %q:\n%s", want, out)
		}
	}
	if n := minutes(); n != 2 {
		t.Fatalf("%d rollups after the rebuild, want 2\n%s", n, out)
	}
	if out, err := check(); err != nil || !strings.Contains(out, "rollup tiers match the values") {
		t.Fatalf("rollups check after the rebuild: %v\n%s", err, out)
	}
	bad := exec.Command(bin, "rollups", "rebuild", "--since", "yesterday")
	bad.Env = cmd.Env
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "--since") {
		t.Fatalf("a bad --since is accepted: %v\n%s", err, out)
	}
}

// TestLoadReportsProgress: load writes its data set in-process and reports the step as
// it starts and ends (pkg/progress adds a line every 2 s while it runs).
func TestLoadReportsProgress(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "load", "--points", "50", "--start", "2019-01-01T00:00:00Z")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	for _, want := range []string{"load: [   0s] writing 50 dots…", "] writing 50 dots: done in", "loaded 50 dots in"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("load printed no %q:\n%s", want, out)
		}
	}
}

// TestServeAndMigrateRefuseNotUTF8: on a database encoded SQL_ASCII, `migrate` and
// `serve` exit 1 at once (serve does not wait for it as for a database that is still
// starting), saying how to create a UTF8 one, and create nothing in it.
func TestServeAndMigrateRefuseNotUTF8(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	const name = "ascii_cli"
	dsn := env.SQLASCIIDatabase(t, name)
	for _, sub := range []string{"migrate", "serve"} {
		// serve would retry for two minutes if it took this for a database still starting
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		cmd := exec.CommandContext(cctx, bin, sub)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "SENSORAPI_ADDR="+freeAddr(t), "SENSORAPI_MQTT_ADDR=")
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
			!strings.Contains(string(out), `database "`+name+`" is SQL_ASCII`) ||
			!strings.Contains(string(out), `CREATE DATABASE "`+name+`" ENCODING 'UTF8' TEMPLATE template0`) {
			t.Fatalf("%s: %v\n%s", sub, err, out)
		}
	}
	db, err := store.Open(ctx, dsn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var tables int
	if err := db.NewRaw(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(ctx, &tables); err != nil || tables != 0 {
		t.Fatalf("%d tables created (%v)", tables, err)
	}
}
