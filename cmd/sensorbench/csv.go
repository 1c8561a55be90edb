package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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
// its bytes — alternating the two, and the server's resident memory growth during the
// exports (the export must stay flat: target ≤ 32 MiB whatever the range).
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
	floor := func() (int64, int64, error) {
		out, err := h.TSDB.Exec(ctx, "set -o pipefail; PGPASSWORD=postgres psql -U postgres -d postgres -X -q -c '"+copySQL+"' | wc -lc")
		if err != nil {
			return 0, 0, err
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			return 0, 0, fmt.Errorf("psql \\copy: %q", out)
		}
		lines, _ := strconv.ParseInt(f[0], 10, 64)
		size, err := strconv.ParseInt(f[1], 10, 64)
		return lines, size, err
	}
	url := fmt.Sprintf("%s/api/v1.6/variables/%s/values?format=csv", h.URL, s.variableID)
	base := benchharness.RSSKiB(h.Server.Process.Pid)
	rss := h.SampleRSS()
	var viaHTTP, viaPsql []time.Duration
	var rows, size, floorRows, floorSize int64
	fmt.Printf("CSV export of %d values of one variable, %d runs each, alternating (floor: psql %s, in the database container)\n",
		s.points, csvRuns, copySQL)
	for range csvRuns {
		t0 := time.Now()
		var err error
		if rows, size, err = exportCSV(ctx, url, s.token); err != nil {
			return err
		}
		viaHTTP = append(viaHTTP, time.Since(t0))
		t0 = time.Now()
		if floorRows, floorSize, err = floor(); err != nil {
			return err
		}
		viaPsql = append(viaPsql, time.Since(t0))
	}
	peak := rss.Stop()
	if rows != int64(s.points) || floorRows != int64(s.points) {
		return fmt.Errorf("CSV export: %d rows through HTTP, %d through psql, want %d", rows, floorRows, s.points)
	}
	tHTTP, tPsql := median(viaHTTP), median(viaPsql)
	fmt.Printf("  HTTP  %7.1f s  %8.0f rows/s  %6.0f MiB (timestamp,value,context,created_at; newest first)\n",
		tHTTP.Seconds(), float64(rows)/tHTTP.Seconds(), float64(size)/(1<<20))
	fmt.Printf("  psql  %7.1f s  %8.0f rows/s  %6.0f MiB (ts,value)\n",
		tPsql.Seconds(), float64(floorRows)/tPsql.Seconds(), float64(floorSize)/(1<<20))
	fmt.Printf("  rate HTTP / psql %.2f× (target ≥ 0.8×)   server RSS %.0f → peak %.0f MiB, growth %.0f MiB (target ≤ 32 MiB)\n\n",
		tPsql.Seconds()/tHTTP.Seconds(), float64(base)/1024, peak, peak-float64(base)/1024)
	return nil
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

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
