package querybuilder

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/NAME, or rewrites it under -update, so every change
// to the compiled SQL shows up as a reviewed text diff.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./querybuilder -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the compiled SQL (go test ./querybuilder -update rewrites it after review)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
