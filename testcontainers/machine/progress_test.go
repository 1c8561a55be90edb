package machine

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestStepLines: a script's "==> " lines begin steps, even split across writes, and
// the other lines are kept for an error message.
func TestStepLines(t *testing.T) {
	var begun []string
	w := &stepLines{begin: func(name string) { begun = append(begun, name) }}
	_, _ = w.Write([]byte("==> debootstrap\nnoise one\n==> docker b"))
	_, _ = w.Write([]byte("uild\nnoise two\n"))
	if strings.Join(begun, "|") != "debootstrap|docker build" {
		t.Errorf("steps %q", begun)
	}
	if string(w.kept) != "noise one\nnoise two\n" {
		t.Errorf("kept %q", w.kept)
	}
}

// TestExclusive: another process's first-time steps wait while the lock is held, and
// run once it is released.
func TestExclusive(t *testing.T) {
	lockPath = t.TempDir() + "/lock"
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = exclusive(context.Background(), func() error { close(held); <-release; return nil })
	}()
	<-held
	ran := make(chan struct{})
	go func() { _ = exclusive(context.Background(), func() error { close(ran); return nil }) }()
	select {
	case <-ran:
		t.Fatal("ran while the lock was held")
	case <-time.After(700 * time.Millisecond):
	}
	close(release)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("did not run after the lock was released")
	}
}
