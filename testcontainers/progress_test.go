package testcontainers

import (
	"strings"
	"testing"
	"time"
)

// TestStepLines: a script's "==> " lines begin steps, each is reported while it runs
// and when it ends, and the other lines are kept for an error message.
func TestStepLines(t *testing.T) {
	var out strings.Builder
	p := &progress{out: &out, every: 20 * time.Millisecond}
	w := &stepLines{p: p}
	_, _ = w.Write([]byte("==> debootstrap\nnoise one\n==> docker b"))
	time.Sleep(70 * time.Millisecond)
	_, _ = w.Write([]byte("uild\nnoise two\n"))
	time.Sleep(30 * time.Millisecond)
	p.end()
	got := out.String()
	for _, want := range []string{"debootstrap…", "debootstrap: done in", "docker build…", "docker build: done in"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Count(got, "still debootstrap") < 2 {
		t.Errorf("no periodic line while the step ran:\n%s", got)
	}
	if string(w.kept) != "noise one\nnoise two\n" {
		t.Errorf("kept %q", w.kept)
	}
}
