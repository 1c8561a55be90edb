package machine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sensordata/sensorapi/pkg/progress"
)

// steps reports the long first-time steps (installing Docker, building the image).
var steps = progress.New(os.Stderr, "prepare", progress.Every)

var firstRunNote sync.Once

// beginStep starts a long step, saying once beforehand why a first run takes minutes.
func beginStep(name string) {
	firstRunNote.Do(func() {
		fmt.Fprintln(os.Stderr, "prepare: first run on this machine: installing Docker and/or building a TimescaleDB "+
			"image from Debian packages (debootstrap, apt-get, initdb; no container registry needs to be reachable). "+
			"This takes a few minutes, once; each step is printed as it starts, with a line every 10 s while it runs.")
	})
	steps.Begin(name, nil)
}

// lockPath is the machine-wide lock of the first-time steps.
var lockPath = filepath.Join(os.TempDir(), "sensorapi-prepare.lock")

// exclusive runs fn holding a machine-wide lock, so that processes preparing at the
// same time (test binaries, make run, another engineer's prepare) neither run apt-get
// nor build the image twice at once; fn checks again what another may have done.
func exclusive(ctx context.Context, fn func() error) error {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("prepare lock: %w", err)
	}
	defer func() { _ = f.Close() }() // closing releases the lock
	for waiting := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("prepare lock %s: %w", lockPath, err)
		}
		if !waiting {
			waiting = true
			steps.Begin("waiting for another process that is preparing Docker or the image", nil)
			defer steps.End()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prepare lock: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fn()
}

// stepLines is an io.Writer for a script's output: each line starting with "==> "
// begins a step; the rest is kept for the error message.
type stepLines struct {
	begin func(name string)
	buf   []byte
	kept  []byte
}

func (w *stepLines) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if name, ok := strings.CutPrefix(line, "==> "); ok {
			w.begin(name)
			continue
		}
		w.kept = append(append(w.kept, line...), '\n')
	}
}
