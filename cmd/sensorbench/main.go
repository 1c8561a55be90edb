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
)

func main() {
	points := flag.Int("ingest-dots", 1_000_000, "dots written by the ingestion benchmark (per side)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *points); err != nil {
		fmt.Fprintln(os.Stderr, "sensorbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ingestDots int) error {
	h, err := startHarness(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Printf("sensorbench %s — server pid %d, database %s\n\n", time.Now().UTC().Format(time.RFC3339), h.server.Process.Pid, h.image)
	return benchIngest(ctx, h, ingestDots)
}
