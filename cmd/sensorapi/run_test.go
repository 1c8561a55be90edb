package main_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var adminTokenLine = regexp.MustCompile(`admin token: (\S+)`)

// TestRunKeepsData: `serve` without DATABASE_URL (what make run does) keeps its data in
// a Docker volume: a value written, a stop, a start again, and the value reads back
// with the same admin token, printed again.
func TestRunKeepsData(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("starts a TimescaleDB container of its own")
	}
	bin := buildBinary(t)
	volume := fmt.Sprintf("sensorapi-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", volume).Run() })
	home := t.TempDir() // the saved admin token goes under it
	run := func() (string, func()) {
		t.Helper()
		addr := freeAddr(t)
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "SENSORAPI_ADMIN_TOKEN=", "SENSORAPI_DATA_VOLUME="+volume,
			"XDG_CONFIG_HOME="+home, "SENSORAPI_ADDR="+addr, "SENSORAPI_MQTT_ADDR="+freeAddr(t))
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
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
		case token := <-tok:
			waitReady(t, "http://"+addr)
			return "http://" + addr + "|" + token, stop
		case <-time.After(3 * time.Minute):
			stop()
			t.Fatal("no admin token printed")
		}
		return "", nil
	}
	do := func(target, method, path, body string) (int, string) {
		t.Helper()
		base, tok, _ := strings.Cut(target, "|")
		return httpDo(t, base, method, path, tok, body)
	}

	first, stop := run()
	if status, body := do(first, "POST", "/api/v1.6/devices/kept/t/values", `{"value":42,"timestamp":1000}`); status != 201 {
		stop()
		t.Fatalf("write: %d %s", status, body)
	}
	stop()
	second, stop := run()
	defer stop()
	if _, tok1, _ := strings.Cut(first, "|"); !strings.HasSuffix(second, "|"+tok1) {
		t.Fatalf("another admin token was printed after the restart")
	}
	if status, body := do(second, "GET", "/api/v1.6/devices/kept/t/lv", ""); status != 200 || strings.TrimSpace(body) != "42" {
		t.Fatalf("after the restart: %d %s", status, body)
	}
}
