// Command sensorbench is `make bench`: it starts TimescaleDB (or uses DATABASE_URL),
// runs the real `sensorapi serve` binary as a separate process, and measures each
// workload through HTTP next to its floor — the same SQL path run directly in the same
// run — while sampling the server's resident memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sensordata/sensorapi/pkg/benchharness"
)

func main() {
	points := flag.Int("ingest-dots", 1_000_000, "dots written by the ingestion benchmark (per side)")
	year := flag.Int("series-points", 10_512_000, "points of the analytics series (a year at 3 s)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *points, *year); err != nil {
		fmt.Fprintln(os.Stderr, "sensorbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ingestDots, seriesPoints int) error {
	h, err := benchharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Printf("sensorbench %s — server pid %d, database %s\n\n", time.Now().UTC().Format(time.RFC3339), h.Server.Process.Pid, h.Image)
	if err := benchIngest(ctx, h, ingestDots); err != nil {
		return err
	}
	s, err := loadSeries(ctx, h, seriesPoints)
	if err != nil {
		return err
	}
	rss := h.SampleRSS()
	if err := benchStatistics(ctx, h, s); err != nil {
		return err
	}
	if err := benchResample(ctx, h, s); err != nil {
		return err
	}
	fmt.Printf("server peak RSS during the analytics benchmarks: %.0f MiB (target < 256 MiB)\n", rss.Stop())
	return nil
}
