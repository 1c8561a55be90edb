package testcontainers

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progressEvery is how often a long step says it is still running.
const progressEvery = 10 * time.Second

// progress prints each long first-time step as it starts, with the time since the
// first one, and a line every progressEvery while it runs, so that a first run that
// installs Docker and builds an image for minutes does not look hung.
type progress struct {
	out   io.Writer
	every time.Duration
	start time.Time

	mu   sync.Mutex
	name string
	at   time.Time
	stop chan struct{}
}

var steps = &progress{out: os.Stderr, every: progressEvery}

// begin announces a step (ending the previous one) and keeps reporting it until end.
func (p *progress) begin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
	now := time.Now()
	if p.start.IsZero() {
		p.start = now
	}
	p.name, p.at, p.stop = name, now, make(chan struct{})
	fmt.Fprintf(p.out, "prepare: [%s] %s…\n", p.elapsed(now), name)
	go p.tick(name, now, p.stop)
}

// end closes the current step.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}

func (p *progress) endLocked() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	fmt.Fprintf(p.out, "prepare: [%s] %s: done in %s\n", p.elapsed(time.Now()), p.name,
		time.Since(p.at).Round(time.Second))
	p.stop = nil
}

func (p *progress) tick(name string, since time.Time, stop chan struct{}) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			fmt.Fprintf(p.out, "prepare: [%s] still %s… %s\n", p.elapsed(now), name, now.Sub(since).Round(time.Second))
		}
	}
}

func (p *progress) elapsed(now time.Time) string {
	return fmt.Sprintf("%4ds", int(now.Sub(p.start).Seconds()))
}

// stepLines is an io.Writer for a script's output: each line starting with "==> "
// begins a step; the rest is kept for the error message.
type stepLines struct {
	p    *progress
	buf  []byte
	kept []byte
}

func (w *stepLines) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := indexNewline(w.buf)
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if len(line) > 4 && line[:4] == "==> " {
			w.p.begin(line[4:])
			continue
		}
		w.kept = append(append(w.kept, line...), '\n')
	}
}

func indexNewline(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}
