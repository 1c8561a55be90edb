package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/retention"
)

const retentionUsage = `Usage: sensorapi retention run [--raw D] [--rollups D]

Applies the retention once, now (API.md §16, docs/operations.md "Retention"): drops
the chunks of raw values older than SENSORAPI_RETENTION_RAW and those of the rollup
tiers older than SENSORAPI_RETENTION_ROLLUPS (durations such as 90d, 36h, 2w; the
flags override them), records the raw horizon, and prints what it did: the chunks
and rows removed and the horizon. serve runs the same job at start and hourly when
either is set.

Only one instance runs it at a time (PostgreSQL advisory lock %d): when another
holds the lock, nothing is done and the command exits 1.

Examples:
  DATABASE_URL=postgres://... SENSORAPI_RETENTION_RAW=90d sensorapi retention run
  DATABASE_URL=postgres://... sensorapi retention run --raw 90d --rollups 2y

Flags:
`

func retentionCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("retention", flag.ContinueOnError)
	raw := fs.String("raw", "", "keep raw values this long (default: SENSORAPI_RETENTION_RAW)")
	rollups := fs.String("rollups", "", "keep the rollup tiers this long (default: SENSORAPI_RETENTION_ROLLUPS)")
	fs.Usage = func() { fmt.Fprintf(fs.Output(), retentionUsage, retention.LockKey); fs.PrintDefaults() }
	// flags after the subcommand, as "rollups rebuild" reads them
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	} else {
		args = append(args, "") // no subcommand: usage below
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("retention: want 'run [--raw D] [--rollups D]'")
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	r := cfg.Retention
	for _, f := range []struct {
		name, v string
		dst     *time.Duration
	}{{"--raw", *raw, &r.Raw}, {"--rollups", *rollups, &r.Rollups}} {
		if f.v == "" {
			continue
		}
		if *f.dst, err = config.ParseRetention(f.v); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if r.Rollups > 0 && (r.Raw == 0 || r.Raw > r.Rollups) {
		return errors.New("the rollup retention must be at least the raw retention: the rollups are read wherever raw values exist")
	}
	if !r.Enabled() {
		return errors.New("retention: nothing to do: set SENSORAPI_RETENTION_RAW (and SENSORAPI_RETENTION_ROLLUPS) or pass --raw (--rollups)")
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	job := &retention.Job{Pool: db.Pool, Options: retention.Options{Raw: r.Raw, Rollups: r.Rollups},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := job.Run(ctx)
	if err != nil {
		return err
	}
	if res.Skipped {
		return fmt.Errorf("retention: another instance is applying it now (advisory lock %d held): nothing done", retention.LockKey)
	}
	printRetention(os.Stdout, r, res)
	return nil
}

// printRetention tells what a run did.
func printRetention(w io.Writer, r config.Retention, res retention.Result) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if r.Raw > 0 {
		fmt.Fprintf(w, "raw values: kept %s (cutoff %s): dropped %d chunks, %d rows\n",
			config.FormatRetention(r.Raw), ts(res.RawCutoff), len(res.RawChunks), res.RowsRemoved)
		for _, c := range res.RawChunks {
			fmt.Fprintf(w, "  %s [%s, %s): %d rows\n", c.Name, ts(c.Start), ts(c.End), c.Rows)
		}
	} else {
		fmt.Fprintln(w, "raw values: kept forever")
	}
	if res.HasHorizon {
		fmt.Fprintf(w, "raw horizon: %s (%d ms)\n", ts(res.Horizon), res.Horizon.UnixMilli())
	} else {
		fmt.Fprintln(w, "raw horizon: none (no raw value was ever removed)")
	}
	if r.Rollups == 0 {
		fmt.Fprintln(w, "rollups: kept forever")
		return
	}
	fmt.Fprintf(w, "rollups: kept %s (cutoff %s):", config.FormatRetention(r.Rollups), ts(res.TierCutoff))
	for _, t := range res.Tiers {
		fmt.Fprintf(w, " %s %d chunks", t.Table, t.Chunks)
	}
	fmt.Fprintln(w)
}
