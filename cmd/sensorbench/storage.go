package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/values"
)

// seriesKind is one kind of series of issue 32's storage benchmark: every interval
// from the start for 90 days, value(i, previous) the i-th value, jitter the most a
// timestamp moves off the grid.
type seriesKind struct {
	label    string
	interval time.Duration
	jitter   time.Duration
	value    func(rng *rand.Rand, i int, prev float64) float64
}

// storageKinds are the six kinds: issue 32's four at 10 s, one point a minute and a
// 0/1 state that flips rarely.
var storageKinds = []seriesKind{
	{"temperature", 10 * time.Second, 0, func(r *rand.Rand, _ int, p float64) float64 { // a 2-decimal random walk
		return math.Round((p+(r.Float64()-0.5)*0.1)*100) / 100
	}},
	{"humidity", 10 * time.Second, 50 * time.Millisecond, func(r *rand.Rand, _ int, p float64) float64 { // an integer, rarely changing
		if r.IntN(100) == 0 {
			return p + float64(r.IntN(5)-2)
		}
		return p
	}},
	{"power", 10 * time.Second, 0, func(r *rand.Rand, _ int, _ float64) float64 { return 1000 + r.Float64()*500 }},
	{"energy", 10 * time.Second, 0, func(r *rand.Rand, _ int, p float64) float64 { // a monotonic counter
		return math.Round((p+r.Float64()*0.5)*1000) / 1000
	}},
	{"per-minute", time.Minute, 0, func(r *rand.Rand, _ int, p float64) float64 {
		return math.Round((p+(r.Float64()-0.5))*10) / 10
	}},
	{"state", 10 * time.Second, 0, func(r *rand.Rand, _ int, p float64) float64 { // 0/1, flipping rarely
		if r.IntN(2000) == 0 {
			return 1 - p
		}
		return p
	}},
}

// benchStorage is issue 32's storage benchmark: the six kinds over 90 days written
// through the bulk endpoint, then `storage pack`: bytes per point per kind and per
// table, the database's growth per point before and after, and the pack throughput.
func benchStorage(ctx context.Context, h *benchharness.Harness) error {
	fmt.Println("storage (issue 32): six kinds of series over 90 days, written through the bulk endpoint")
	_, tok, err := h.NewAccount(ctx, "storage")
	if err != nil {
		return err
	}
	dbBefore, err := databaseSize(ctx, h)
	if err != nil {
		return err
	}
	start := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	points := map[string]int{}
	total := 0
	for _, k := range storageKinds {
		n, err := writeSeries(ctx, h.URL, tok, k, start, 90*24*time.Hour)
		if err != nil {
			return fmt.Errorf("%s: %w", k.label, err)
		}
		points[k.label] = n
		total += n
	}
	if _, err := h.DB.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	asRows, err := databaseSize(ctx, h)
	if err != nil {
		return err
	}
	rows, err := values.Measure(ctx, h.DB.Pool)
	if err != nil {
		return err
	}
	fmt.Printf("  %d points; as rows, sensorapi storage report:\n", total)
	if err := rows.Print(os.Stdout); err != nil {
		return err
	}
	p := &values.Packer{Store: &values.Store{Pool: h.DB.Pool}, After: config.DefaultPackAfter, Log: slog.Default(),
		Workers: values.DefaultWorkers}
	t0 := time.Now()
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	if _, err := h.DB.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	packed, err := databaseSize(ctx, h)
	if err != nil {
		return err
	}
	fmt.Printf("  storage pack (%d workers): %d days, %d points in %.1fs = %.0f points/s (target ≥ 500,000), %d chunks dropped\n",
		p.Workers, res.Days, res.Points, took.Seconds(), float64(res.Points)/took.Seconds(), len(res.Chunks))
	after, err := values.Measure(ctx, h.DB.Pool)
	if err != nil {
		return err
	}
	fmt.Println("  packed, sensorapi storage report:")
	if err := after.Print(os.Stdout); err != nil {
		return err
	}
	if err := printKinds(ctx, h, points); err != nil {
		return err
	}
	fmt.Printf("  pg_database_size growth per point: %.1f B as rows, %.1f B packed (target ≤ 12, goal ≤ 8)\n\n",
		float64(asRows-dbBefore)/float64(total), float64(packed-dbBefore)/float64(total))
	return nil
}

// printKinds prints the packed bytes per point of each kind (its packed rows' size).
func printKinds(ctx context.Context, h *benchharness.Harness, points map[string]int) error {
	rows, err := h.DB.QueryContext(ctx, `SELECT v.label, sum(pg_column_size(p.*))::float8 / sum(p.n)
		FROM values_packed p JOIN variables v ON v.id = p.variable_id JOIN accounts a ON a.id = v.account_id
		WHERE a.name = 'bench_storage' GROUP BY v.label ORDER BY v.label`)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  kind\tpoints\tpacked B/point\t\n")
	for rows.Next() {
		var label string
		var perPoint float64
		if err := rows.Scan(&label, &perPoint); err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.2f\t\n", label, points[label], perPoint)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}

func databaseSize(ctx context.Context, h *benchharness.Harness) (int64, error) {
	var n int64
	err := h.DB.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

// writeSeries posts one kind's series to device "storage" in requests of 5,000 dots
// (the bulk endpoint) and returns how many it wrote.
func writeSeries(ctx context.Context, url, token string, k seriesKind, start time.Time, span time.Duration) (int, error) {
	rng := rand.New(rand.NewPCG(32, uint64(len(k.label))))
	n := int(span / k.interval)
	v := 50.0
	if k.label == "state" {
		v = 0
	}
	batch := make([]map[string]any, 0, 5000)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		body, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1.6/devices/storage/"+k.label+"/values", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("X-Auth-Token", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		batch = batch[:0]
		return nil
	}
	for i := range n {
		ts := start.Add(time.Duration(i) * k.interval)
		if k.jitter > 0 {
			ts = ts.Add(time.Duration(rng.Int64N(int64(2*k.jitter+1))) - k.jitter)
		}
		v = k.value(rng, i, v)
		batch = append(batch, map[string]any{"timestamp": ts.UnixMilli(), "value": v})
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, flush()
}
