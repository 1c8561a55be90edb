package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
)

// csvRuns is how many times each side of the CSV export runs (alternating, median).
const csvRuns = 3

// benchCSV (issue 43): the CSV export of every value of the series (format=csv, one
// streamed response) through HTTP, next to the database's own CSV path on the same
// rows — psql's \copy of (ts, value) inside the database container, to a pipe counting
// its lines and bytes (the floor) — and, for context, the same psql on this host through
// the port the server uses (Docker's userland proxy, which the floor does not cross),
// alternating, and the server's resident memory growth during the exports (the export
// must stay flat: target ≤ 32 MiB whatever the range).
func benchCSV(ctx context.Context, h *benchharness.Harness, s series) error {
	if h.TSDB == nil {
		fmt.Printf("CSV export: skipped (the floor runs psql inside the harness's own database container; DATABASE_URL was set)\n\n")
		return nil
	}
	var key int64
	if err := h.DB.NewRaw(`SELECT id FROM variables WHERE public_id = ?`, s.variableID).Scan(ctx, &key); err != nil {
		return err
	}
	copySQL := fmt.Sprintf(`\copy (SELECT ts, value FROM "values" WHERE variable_id = %d) TO STDOUT CSV`, key)
	sides := []csvSide{
		{name: "HTTP", what: "timestamp,value,context,created_at; newest first", run: func() (int64, int64, error) {
			return exportCSV(ctx, fmt.Sprintf("%s/api/v1.6/variables/%s/values?format=csv", h.URL, s.variableID), s.token)
		}},
		{name: "psql in the container (floor)", what: "ts,value", run: func() (int64, int64, error) {
			return countLines(h.TSDB.Exec(ctx, "set -o pipefail; PGPASSWORD=postgres psql -U postgres -d postgres -X -q -c '"+copySQL+"' | wc -lc"))
		}},
	}
	if _, err := exec.LookPath("psql"); err == nil {
		sides = append(sides, csvSide{name: "psql on the host, via the server's port", what: "ts,value", run: func() (int64, int64, error) {
			out, err := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; psql \"$1\" -X -q -c \"$2\" | wc -lc", "-", h.DSN, copySQL).Output()
			return countLines(string(out), err)
		}})
	}
	fmt.Printf("CSV export of %d values of one variable, median of %d runs each, alternating (psql: %s)\n", s.points, csvRuns, copySQL)
	base := benchharness.RSSKiB(h.Server.Process.Pid)
	rss := h.SampleRSS()
	for range csvRuns {
		for i := range sides {
			if err := sides[i].measure(int64(s.points)); err != nil {
				return err
			}
		}
	}
	peak := rss.Stop()
	for _, side := range sides {
		fmt.Printf("  %-42s %6.1f s  %8.0f rows/s  %5.0f MiB (%s)\n", side.name, side.median().Seconds(),
			float64(s.points)/side.median().Seconds(), float64(side.size)/(1<<20), side.what)
	}
	fmt.Printf("  rate HTTP / floor %.2f× (target ≥ 0.8×)", sides[1].median().Seconds()/sides[0].median().Seconds())
	if len(sides) > 2 {
		fmt.Printf("; HTTP / host psql %.2f×", sides[2].median().Seconds()/sides[0].median().Seconds())
	}
	fmt.Printf("\n  server RSS %.0f MiB before, peak %.0f MiB during: growth %.0f MiB (target ≤ 32 MiB)\n\n",
		float64(base)/1024, peak, peak-float64(base)/1024)
	return nil
}

// csvSide is one way of exporting the rows, and its runs.
type csvSide struct {
	name, what string
	run        func() (rows, size int64, err error)
	times      []time.Duration
	size       int64
}

// measure runs the side once and checks it exported every row.
func (c *csvSide) measure(want int64) error {
	t0 := time.Now()
	rows, size, err := c.run()
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if rows != want {
		return fmt.Errorf("%s: %d rows, want %d", c.name, rows, want)
	}
	c.times, c.size = append(c.times, time.Since(t0)), size
	return nil
}

func (c *csvSide) median() time.Duration {
	s := slices.Clone(c.times)
	slices.Sort(s)
	return s[len(s)/2]
}

// countLines reads wc -lc's answer.
func countLines(out string, err error) (lines, size int64, _ error) {
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, out)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("psql \\copy | wc -lc: %q", out)
	}
	lines, _ = strconv.ParseInt(f[0], 10, 64)
	size, err = strconv.ParseInt(f[1], 10, 64)
	return lines, size, err
}

// exportCSV downloads an export, counting its data rows (not the header) and bytes.
func exportCSV(ctx context.Context, url, token string) (rows, size int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("CSV export: %d %s", resp.StatusCode, b)
	}
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	buf := make([]byte, 1<<16)
	for {
		n, err := r.Read(buf)
		rows += int64(bytes.Count(buf[:n], []byte{'\n'}))
		size += int64(n)
		if err == io.EOF {
			return rows - 1, size, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("CSV export: %w", err)
		}
	}
}
