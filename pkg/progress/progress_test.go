package progress

import (
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSteps: each step is announced, says it is still running at every interval with
// its status, ends with its duration when the next one begins or on End, and nothing
// is printed for it after that.
func TestSteps(t *testing.T) {
	var out strings.Builder
	r := New(&out, "prepare", 20*time.Millisecond)
	var n atomic.Int64
	r.Begin("debootstrap", func() string { return strings.Repeat("x", int(n.Add(1))) })
	waitFor(t, func() bool { return n.Load() >= 2 })
	var built atomic.Bool
	r.Begin("docker build", func() string { built.Store(true); return "" })
	waitFor(t, built.Load)
	r.End()
	r.End() // no step: nothing
	got := out.String()
	time.Sleep(60 * time.Millisecond)
	if out.String() != got {
		t.Fatalf("printed after End:\n%s", out.String())
	}
	// elapsed times as N s: how many seconds a step takes depends on the machine
	lines := strings.Split(seconds.ReplaceAllString(strings.TrimSpace(got), "${1}Ns"), "\n")
	want := []string{"] debootstrap…", "] still debootstrap… Ns: x", "] still debootstrap… Ns: xx", "] debootstrap: done in Ns",
		"] docker build…", "] still docker build… Ns: ", "] docker build: done in Ns"}
	for _, w := range want {
		if !containsLine(lines, w) {
			t.Errorf("no line with %q in:\n%s", w, got)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "prepare: [   Ns] ") {
			t.Errorf("line without prefix and elapsed time: %q", l)
		}
	}
	if strings.Index(got, "debootstrap: done") > strings.Index(got, "docker build…") {
		t.Errorf("the next step began before the previous one ended:\n%s", got)
	}
}

// seconds finds an elapsed time, keeping what stands before it.
var seconds = regexp.MustCompile(`(\[ *| |in )\d+s`)

func containsLine(lines []string, suffix string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no periodic line within 30 s")
		}
	}
}

// TestMeter: the status names the share, items, rate and time left of a transfer, and
// the bar fills in proportion.
func TestMeter(t *testing.T) {
	m := NewMeter(1000)
	m.start = time.Unix(0, 0)
	m.Add(250, 5000)
	if got, want := m.status("rows", time.Unix(10, 0)), " 25%, 5000 rows, 500 rows/s, ETA 30s"; got != want {
		t.Fatalf("status %q, want %q", got, want)
	}
	var out strings.Builder
	m.Draw(&out, "rows")
	if !strings.HasPrefix(out.String(), "\r["+strings.Repeat("=", 7)+strings.Repeat(" ", 23)+"]  25%") {
		t.Fatalf("bar %q", out.String())
	}
	if got := NewMeter(0).status("rows", time.Now()); !strings.HasPrefix(got, "0 rows, ") {
		t.Fatalf("unknown size: %q", got)
	}
}
