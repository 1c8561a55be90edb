// Command sensorbench is `make bench`: it starts TimescaleDB (or uses DATABASE_URL),
// runs the real `sensorapi serve` binary as a separate process, and measures each
// workload through HTTP next to its floor — the same SQL path run directly in the same
// run — while sampling the server's resident memory. The tiers workload (issue 17)
// measures analytics over a week of 100 variables and a year of one, written with
// `sensorapi load`, next to the SQL an operator would write by hand over raw values.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
)

func main() {
	points := flag.Int("ingest-dots", 1_000_000, "dots written by the ingestion benchmark (per side)")
	year := flag.Int("series-points", 10_512_000, "points of the analytics series (a year at 3 s)")
	fleet := flag.Duration("fleet-duration", 20*time.Second, "how long each side of the fleet and collections benchmarks runs")
	tiersScale := flag.Float64("tiers-scale", 1, "fraction of the tiers and sql workloads' week and year to load (for a quick trial)")
	csvPoints := flag.Int("csv-points", 10_000_000, "values of the CSV export's variable when the analytics series is not loaded (-only csv)")
	only := flag.String("only", "", "run one workload: ingest (with collections), collections, bulkold, fleet, mqtt, analytics, csv, storage, tiers, sql or import (default: all)")
	flag.IntVar(&importRows, "import-rows", 10_000_000, "rows of the history import benchmark (one variable)")
	flag.IntVar(&fleetEvents, "fleet-events", fleetEventsDefault(),
		"active events over the fleet's variables during the fleet benchmark (SENSORAPI_BENCH_FLEET_EVENTS; 0: none)")
	flag.BoolVar(&fleetSynthetic, "fleet-synthetic", fleetSyntheticDefault(),
		"two synthetic variables on every fleet device during the fleet benchmark (SENSORAPI_BENCH_FLEET_SYNTHETIC=1)")
	ceilingMode := flag.Bool("ceiling", false, "serve the fleet's parse-and-discard ceiling (run by the fleet benchmark itself)")
	flag.Parse()
	if *ceilingMode {
		if err := serveCeiling(); err != nil {
			fmt.Fprintln(os.Stderr, "sensorbench -ceiling:", err)
			os.Exit(1)
		}
		return
	}
	if fleetEvents > 0 { // the events' webhooks go to a receiver in this process
		_ = os.Setenv("SENSORAPI_WEBHOOK_ALLOW_PRIVATE", "true")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *only, *points, *year, *csvPoints, *fleet, *tiersScale); err != nil {
		fmt.Fprintln(os.Stderr, "sensorbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, only string, ingestDots, seriesPoints, csvPoints int, fleet time.Duration, tiersScale float64) error {
	h, err := benchharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Printf("sensorbench %s — server pid %d, database %s\n\n", time.Now().UTC().Format(time.RFC3339), h.Server.Process.Pid, h.Image)
	if only == "" || only == "ingest" {
		if err := benchIngest(ctx, h, ingestDots); err != nil {
			return err
		}
	}
	if only == "" || only == "ingest" || only == "collections" {
		if err := benchCollections(ctx, h, fleet); err != nil {
			return err
		}
	}
	if only == "" || only == "bulkold" {
		if err := benchBulkOld(ctx, h, fleet); err != nil {
			return err
		}
	}
	if only == "" || only == "fleet" || only == "mqtt" {
		if err := benchFleet(ctx, h, fleet, only != "mqtt", only != "fleet"); err != nil {
			return err
		}
	}
	var loaded *series // the analytics series, which the CSV export reads too
	if only == "" || only == "analytics" {
		s, err := loadSeries(ctx, h, seriesPoints)
		if err != nil {
			return err
		}
		loaded = &s
		if err := benchAnalytics(ctx, h, s); err != nil {
			return err
		}
	}
	if only == "" || only == "csv" {
		if loaded == nil {
			s, err := loadSeries(ctx, h, csvPoints)
			if err != nil {
				return err
			}
			loaded = &s
		}
		if err := benchCSV(ctx, h, *loaded); err != nil {
			return err
		}
	}
	if only == "" || only == "storage" {
		if err := benchStorage(ctx, h); err != nil {
			return err
		}
	}
	if only == "" || only == "import" {
		if err := benchImport(ctx, h, importRows); err != nil {
			return err
		}
	}
	if only == "" || only == "tiers" {
		if err := benchTiers(ctx, h, tiersScale); err != nil {
			return err
		}
	}
	if only == "" || only == "sql" {
		return benchSQL(ctx, h, tiersScale)
	}
	return nil
}

// importRows is -import-rows.
var importRows int

// benchAnalytics measures statistics and resample over the year-long series.
func benchAnalytics(ctx context.Context, h *benchharness.Harness, s series) error {
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
