// Package progress reports long steps while they run (installing Docker, building the
// database image, loading or rebuilding data), so that a run that takes minutes does
// not look hung: a line when a step starts, "still <step>… 40s" at a fixed interval
// while it runs, and one when it ends.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Every is the interval of the "still …" lines: a step is never silent for longer.
const Every = 10 * time.Second

// Reporter prints one step at a time to out, each line prefixed and stamped with the
// time since the first step began. It is safe for concurrent use.
type Reporter struct {
	out    io.Writer
	prefix string
	every  time.Duration

	mu    sync.Mutex
	start time.Time
	cur   *step
}

type step struct {
	name   string
	at     time.Time
	status func() string
	stop   chan struct{}
}

// New returns a Reporter whose running steps print a line every interval.
func New(out io.Writer, prefix string, every time.Duration) *Reporter {
	return &Reporter{out: out, prefix: prefix, every: every}
}

// Begin ends the current step, if any, and starts name. status, when not nil, adds
// how far the step has got (e.g. "1200 of 5000 variables") to each "still" line.
func (r *Reporter) Begin(name string, status func() string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endLocked()
	now := time.Now()
	if r.start.IsZero() {
		r.start = now
	}
	s := &step{name: name, at: now, status: status, stop: make(chan struct{})}
	r.cur = s
	r.printf(now, "%s…", name)
	go r.tick(s)
}

// End ends the current step, printing its duration; it does nothing without one.
func (r *Reporter) End() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endLocked()
}

func (r *Reporter) endLocked() {
	s := r.cur
	if s == nil {
		return
	}
	close(s.stop)
	r.cur = nil
	now := time.Now()
	r.printf(now, "%s: done in %s", s.name, now.Sub(s.at).Round(time.Second))
}

func (r *Reporter) tick(s *step) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			r.still(s, now)
		}
	}
}

// still prints a "still" line unless s ended meanwhile (checked under the lock, so
// that no such line follows the step's "done").
func (r *Reporter) still(s *step, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != s {
		return
	}
	line := fmt.Sprintf("still %s… %s", s.name, now.Sub(s.at).Round(time.Second))
	if s.status != nil {
		line += ": " + s.status()
	}
	r.printf(now, "%s", line)
}

func (r *Reporter) printf(now time.Time, format string, args ...any) {
	_, _ = fmt.Fprintf(r.out, "%s: [%4ds] %s\n", r.prefix, int(now.Sub(r.start).Seconds()), fmt.Sprintf(format, args...))
}
