package sensorapi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFromAnotherModule: a user's module that requires sensorapi (here through a
// replace of this checkout) builds the service image from the module's source and runs
// it, as docs/testing.md says: testdata/usermodule/user_test.go posts values and reads
// statistics.
func TestFromAnotherModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/usermodule/user_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "user_test.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(userGoMod(t, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	img := fmt.Sprintf("sensorapi:outside-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", img).Run() })
	// tidy fills go.sum (from the module cache that this module's build filled; the
	// checksum database need not be reachable); the test then runs with go's default
	// -mod=readonly, as a user's CI does
	for _, args := range [][]string{{"mod", "tidy"}, {"test", "-count=1", "-v", "-run", "TestUserCI", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOSUMDB=off", "SENSORAPI_TEST_IMAGE="+img)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the user's module: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "test" && !strings.Contains(string(out), "--- PASS: TestUserCI") {
			t.Fatalf("the user's test did not run:\n%s", out)
		}
	}
}

// userGoMod requires sensorapi from root, with root's own replace directives so that it
// resolves the versions this module's build already downloaded (a user needs none).
func userGoMod(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(b)
	replaces := regexp.MustCompile(`(?m)^replace .*$`).FindAll(b, -1)
	mod := fmt.Sprintf("module example.com/userci\n\n%s\n\nrequire github.com/sensordata/sensorapi v0.0.0\n\n"+
		"replace github.com/sensordata/sensorapi => %s\n", goLine, root)
	for _, r := range replaces {
		mod += string(r) + "\n"
	}
	return mod
}
