package progress

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// Meter measures a transfer of a known size (bytes) that also counts items (rows): its
// share done, rate and time left, as a status for Reporter's lines or a bar redrawn in
// place on a terminal (Draw). It is safe for concurrent use.
type Meter struct {
	total int64
	start time.Time
	done  atomic.Int64 // bytes
	items atomic.Int64
}

// NewMeter starts measuring a transfer of total bytes (0: unknown).
func NewMeter(total int64) *Meter { return &Meter{total: total, start: time.Now()} }

// Add counts bytes done and items seen.
func (m *Meter) Add(bytes, items int64) {
	m.done.Add(bytes)
	m.items.Add(items)
}

// Items is how many items were counted.
func (m *Meter) Items() int64 { return m.items.Load() }

// Status is "45%, 1200000 rows, 120000 rows/s, ETA 1m20s" (no share or ETA when the
// size is unknown or nothing is done yet).
func (m *Meter) Status(noun string) string { return m.status(noun, time.Now()) }

func (m *Meter) status(noun string, now time.Time) string {
	done, items := m.done.Load(), m.items.Load()
	secs := now.Sub(m.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(items) / secs
	}
	s := fmt.Sprintf("%d %s, %.0f %s/s", items, noun, rate, noun)
	if m.total <= 0 || done <= 0 {
		return s
	}
	left := time.Duration(secs * float64(m.total-done) / float64(done) * float64(time.Second))
	return fmt.Sprintf("%3.0f%%, %s, ETA %s", m.share(done)*100, s, left.Round(time.Second))
}

func (m *Meter) share(done int64) float64 { return min(1, float64(done)/float64(m.total)) }

// barWidth is the bar's width in characters.
const barWidth = 30

// Draw redraws the bar and status in place on a terminal: "\r[=====>    ] 45%, …".
func (m *Meter) Draw(out io.Writer, noun string) {
	fill := 0
	if m.total > 0 {
		fill = int(m.share(m.done.Load()) * barWidth)
	}
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill)
	_, _ = fmt.Fprintf(out, "\r[%s] %s\x1b[K", bar, m.Status(noun))
}
