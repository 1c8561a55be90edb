// Command sensorload is `make loadtest`: against the real `sensorapi serve` binary on
// 127.0.0.1 (and TimescaleDB, started here or DATABASE_URL) it preloads a data set,
// then runs concurrent clients mixing ingestion, reads, statistics and resample for a
// fixed time, and reports throughput, per-route latency, errors and the server's RSS.
// Any error (transport or non-2xx) makes it exit 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/values"
)

type options struct {
	duration  time.Duration
	clients   int
	devices   int
	variables int
	points    int
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", time.Minute, "how long the clients run")
	flag.IntVar(&o.clients, "clients", 32, "concurrent clients")
	flag.IntVar(&o.devices, "devices", 4, "devices preloaded")
	flag.IntVar(&o.variables, "variables", 5, "variables per device preloaded")
	flag.IntVar(&o.points, "points", 50_000, "dots preloaded per variable (10 s apart)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	failed, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sensorload:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// run reports whether any request failed; err is a failure to set the test up.
func run(ctx context.Context, o options) (bool, error) {
	h, err := benchharness.Start(ctx)
	if err != nil {
		return false, fmt.Errorf("harness: %w", err)
	}
	defer h.Close()
	pid := h.Server.Process.Pid
	fmt.Printf("sensorload %s — server pid %d, database %s\n", time.Now().UTC().Format(time.RFC3339), pid, h.Image)
	ds, err := preload(ctx, h, o)
	if err != nil {
		return false, fmt.Errorf("preload: %w", err)
	}
	before := benchharness.RSSKiB(pid)
	rss := h.SampleRSS()
	w := newWorkload(h.URL, ds, o.clients)
	res := w.run(ctx, o.duration)
	peak := rss.Stop()
	after := benchharness.RSSKiB(pid)
	res.print(os.Stdout, o)
	fmt.Printf("server RSS: before %.0f MiB, after %.0f MiB, peak %.0f MiB\n", kib(before), kib(after), peak)
	return res.errors() > 0, nil
}

func kib(n int64) float64 { return float64(n) / 1024 }

// dataset is what the clients address: the account's token, device labels and the
// variables' public ids, and the time range holding the preloaded dots.
type dataset struct {
	token      string
	devices    []string
	varLabels  []string
	varIDs     []string
	start, end time.Time
}

// preload writes the data set in-process through values.Store (the same statements as
// the ingestion route; only the data matters here) into an account of its own.
func preload(ctx context.Context, h *benchharness.Harness, o options) (dataset, error) {
	acct, tok, err := h.NewAccount(ctx, "load_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		return dataset{}, err
	}
	spec := loadgen.Spec{Devices: o.devices, Variables: o.variables, Points: o.points,
		Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Interval: 10 * time.Second, Seed: 3, Batch: 10_000}
	t0 := time.Now()
	st := ingest.Direct(&values.Store{Pool: h.DB.Pool})
	if err := spec.Batches(func(b loadgen.Batch) error { return st.ToDevice(ctx, acct, b.Device, b.Dots) }); err != nil {
		return dataset{}, err
	}
	fmt.Printf("preloaded %d dots (%d devices × %d variables) in %.1fs\n", spec.Total(), o.devices, o.variables,
		time.Since(t0).Seconds())
	ds := dataset{token: tok, start: spec.Start, end: spec.Start.Add(time.Duration(o.points-1) * spec.Interval)}
	for d := range o.devices {
		ds.devices = append(ds.devices, loadgen.DeviceLabel(d))
	}
	for v := range o.variables {
		ds.varLabels = append(ds.varLabels, loadgen.VariableLabel(v))
	}
	err = h.DB.NewRaw(`SELECT public_id FROM variables WHERE account_id = ? ORDER BY id`, acct).Scan(ctx, &ds.varIDs)
	if err != nil {
		return ds, fmt.Errorf("variable ids: %w", err)
	}
	return ds, nil
}
