package main_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportCommand: `sensorapi import` uploads a CSV file, a gzipped NDJSON collection
// and a file with a bad line to a real server: the first two are written (its answer on
// stdout, its progress lines on stderr, not a terminal), the third exits 1 naming the
// line and writes nothing.
func TestImportCommand(t *testing.T) {
	bin := buildBinary(t)
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	dir := t.TempDir()
	var csvText strings.Builder
	csvText.WriteString("timestamp,value,context,created_at\n")
	for i := range 1000 {
		fmt.Fprintf(&csvText, "%d,%d,\"{\"\"i\"\": %d}\",1\n", 1000*(i+1), i, i)
	}
	csvFile := filepath.Join(dir, "history.csv")
	if err := os.WriteFile(csvFile, []byte(csvText.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, append([]string{"import", "--url", c.URL, "--token", tok}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := run("--device", "cli", "--var", "t", csvFile)
	if err != nil || strings.TrimSpace(out) != `{"rows":1000,"variables":1}` || !strings.Contains(errOut, "uploading "+csvFile+": done") {
		t.Fatalf("import: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if r := c.Get("/api/v1.6/devices/cli/t/values?page_size=10000"); r.Status != 200 || len(r.Object(t)["results"].([]any)) != 1000 {
		t.Fatalf("values: %d %.300s", r.Status, r.Body)
	}

	if out, errOut, err := run("--device", "cli", "--var", "z", "--gzip", csvFile); err != nil || strings.TrimSpace(out) != `{"rows":1000,"variables":1}` {
		t.Fatalf("--gzip: %v\nstdout %s\nstderr %s", err, out, errOut)
	}

	var nd bytes.Buffer
	z := gzip.NewWriter(&nd)
	for i := range 10 {
		fmt.Fprintf(z, `{"device": "cli", "variable": "v%d", "timestamp": %d, "value": %d}`+"\n", i%3, i+1, i)
	}
	_ = z.Close()
	gzFile := filepath.Join(dir, "fleet.ndjson.gz")
	if err := os.WriteFile(gzFile, nd.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := run(gzFile); err != nil || strings.TrimSpace(out) != `{"rows":10,"variables":3}` {
		t.Fatalf("collection: %v\nstdout %s\nstderr %s", err, out, errOut)
	}

	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("timestamp,value\n1,1\n2,x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := run("--device", "cli", "--var", "bad", bad); err == nil || !strings.Contains(errOut, `"line 3.value"`) {
		t.Fatalf("bad file: %v\n%s", err, errOut)
	}
	if r := c.Get("/api/v1.6/devices/cli/bad/values"); r.Status != 404 {
		t.Fatalf("bad file wrote: %d %s", r.Status, r.Body)
	}
}
