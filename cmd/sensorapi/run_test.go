package main_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var adminTokenLine = regexp.MustCompile(`admin token: (\S+)`)

// makeRun is `make run` on a volume and a config dir of the test's own.
type makeRun struct {
	t                   *testing.T
	volume, home, token string
	base                string
	cmd                 *exec.Cmd
}

// TestMakeRunKeepsData: `make run` keeps its database between runs: a value written (its
// device and variable created), a stop, a start again, and the value reads back with
// the same admin token, printed again (saved with mode 0600); the container is stopped
// in between and reused, and left running for a first make run when a second stops. `make reset`
// keeps everything unless answered y, and FORCE=1 deletes the container, the volume
// and the saved token.
func TestMakeRunKeepsData(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("starts a TimescaleDB container of its own")
	}
	r := &makeRun{t: t, volume: fmt.Sprintf("sensorapi-test-%d", time.Now().UnixNano()), home: t.TempDir()}
	t.Cleanup(func() {
		_ = exec.Command("docker", "rm", "-f", r.volume).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", r.volume).Run()
	})

	r.start()
	first := r.token
	tokenFile := filepath.Join(r.home, "sensorapi", "admin-token")
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		r.stop()
		t.Fatalf("the admin token is not saved for the owner alone: %v %v", fi, err)
	}
	if status, body := httpDo(t, r.base, "POST", "/api/v1.6/devices/kept/t/values", first, `{"value":42,"timestamp":1000}`); status != 201 {
		r.stop()
		t.Fatalf("write: %d %s", status, body)
	}
	r.stop()
	id := r.containerState("exited")

	r.start()
	if r.token != first {
		r.stop()
		t.Fatalf("another admin token after the restart: %s, was %s", r.token, first)
	}
	status, body := httpDo(t, r.base, "GET", "/api/v1.6/devices/kept/t/lv", first, "")
	r.stop()
	if status != 200 || strings.TrimSpace(body) != "42" {
		t.Fatalf("after the restart: %d %s", status, body)
	}
	if again := r.containerState("exited"); again != id {
		t.Errorf("the container was replaced (%s, was %s), not reused", again, id)
	}

	// a second make run on the same data shares the running container and, stopping,
	// leaves it to the first
	r.start()
	second := &makeRun{t: t, volume: r.volume, home: r.home}
	second.start()
	second.stop()
	r.containerState("running")
	status, body = httpDo(t, r.base, "GET", "/api/v1.6/devices/kept/t/lv", first, "")
	r.stop()
	if status != 200 || strings.TrimSpace(body) != "42" {
		t.Fatalf("the first make run after the second stopped: %d %s", status, body)
	}
	r.containerState("exited")

	// its port taken meanwhile, the kept container is replaced: the data is in the volume
	l, err := net.Listen("tcp", "127.0.0.1:"+r.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	r.start()
	status, body = httpDo(t, r.base, "GET", "/api/v1.6/devices/kept/t/lv", first, "")
	r.stop()
	if status != 200 || strings.TrimSpace(body) != "42" || r.containerState("exited") == id {
		t.Fatalf("with the port taken: %d %s", status, body)
	}

	if out, err := r.make("n\n", "reset"); err == nil || !strings.Contains(out, "kept") || !r.volumeExists() {
		t.Fatalf("make reset answered n: %v\n%s", err, out)
	}
	if out, err := r.make("", "reset", "FORCE=1"); err != nil || r.volumeExists() || r.containerExists() {
		t.Fatalf("make reset FORCE=1: %v\n%s", err, out)
	}
	if _, err := os.Stat(tokenFile); !os.IsNotExist(err) {
		t.Fatalf("make reset left the saved admin token: %v", err)
	}
}

// start runs `make run` and waits for the admin token and /readyz.
func (r *makeRun) start() {
	t := r.t
	t.Helper()
	addr := freeAddr(t)
	r.base = "http://" + addr
	r.cmd = r.makeCmd("run")
	r.cmd.Env = append(r.cmd.Env, "SENSORAPI_ADDR="+addr, "SENSORAPI_MQTT_ADDR="+freeAddr(t))
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop signals make and serve, as Ctrl-C does
	// not StderrPipe: Wait would close it when make exits, and serve, still stopping
	// its database, would die of SIGPIPE; with a writer, Wait also waits for serve
	stderr, w := io.Pipe()
	r.cmd.Stderr = w
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := r.cmd
	t.Cleanup(func() { // a test failing while it runs
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	tok := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := adminTokenLine.FindStringSubmatch(sc.Text()); m != nil {
				tok <- m[1]
			}
		}
	}()
	select {
	case r.token = <-tok:
		waitReady(t, r.base)
	case <-time.After(3 * time.Minute):
		r.stop()
		t.Fatal("make run printed no admin token")
	}
}

// stop signals make run's process group, as Ctrl-C in a terminal does, and waits for
// serve too (it holds the stderr pipe until it has stopped its database).
func (r *makeRun) stop() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	_ = r.cmd.Wait()
	_ = r.cmd.Stderr.(io.Closer).Close()
}

func (r *makeRun) make(stdin string, args ...string) (string, error) {
	cmd := r.makeCmd(args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// makeCmd runs make in the repository with the test's volume and config dir, and
// without the database settings or the outer make's flags (make test).
func (r *makeRun) makeCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"-s", "DATA_VOLUME=" + r.volume}, args...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+r.home, "DATABASE_URL=", "SENSORAPI_ADMIN_TOKEN=",
		"MAKEFLAGS=", "MAKELEVEL=")
	return cmd
}

// containerState checks the test's container is in state want and returns its id.
func (r *makeRun) containerState(want string) string {
	r.t.Helper()
	out, err := exec.Command("docker", "container", "inspect", "-f", "{{.Id}} {{.State.Status}}", r.volume).Output()
	id, state, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || state != want {
		r.t.Fatalf("container %s: %q, want state %s (%v)", r.volume, out, want, err)
	}
	return id
}

// hostPort is the port the stopped container publishes its database on.
func (r *makeRun) hostPort() string {
	r.t.Helper()
	out, err := exec.Command("docker", "container", "inspect", "-f",
		`{{(index (index .HostConfig.PortBindings "5432/tcp") 0).HostPort}}`, r.volume).Output()
	if err != nil {
		r.t.Fatalf("container %s: %v", r.volume, err)
	}
	return strings.TrimSpace(string(out))
}

func (r *makeRun) containerExists() bool {
	return exec.Command("docker", "container", "inspect", r.volume).Run() == nil
}

func (r *makeRun) volumeExists() bool {
	return exec.Command("docker", "volume", "inspect", r.volume).Run() == nil
}
