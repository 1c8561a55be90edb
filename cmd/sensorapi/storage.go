package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/values"
)

const storageUsage = `Usage: sensorapi storage report|pack [--after D]

report prints what a stored point costs on disk: for the raw values and each rollup
tier, its rows and its heap, index and TOAST bytes divided by the raw points stored
(docs/operations.md "Storage per point"). It counts rows exactly: on a large database
it reads every table once.

pack moves the raw values of every day older than the late-data window (--after,
default SENSORAPI_PACK_AFTER or 2d) into the packed layout now, one (variable, day)
per transaction, then drops the chunks it emptied; serve runs the same job hourly.
It can be stopped at any moment and run again: nothing is lost or doubled.

Examples:
  DATABASE_URL=postgres://... sensorapi storage report
  DATABASE_URL=postgres://... sensorapi storage pack --after 2d
`

func storageCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	after := fs.String("after", "", "pack days older than this (default: SENSORAPI_PACK_AFTER, or 2d)")
	workers := fs.Int("workers", values.DefaultWorkers, "days packed at once (database backends)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), storageUsage); fs.PrintDefaults() }
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (sub != "report" && sub != "pack") || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("storage: want 'report' or 'pack [--after D]'")
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	if *after != "" {
		if cfg.PackAfter, err = config.ParseRetention(*after); err != nil {
			return fmt.Errorf("--after: %w", err)
		}
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if sub == "pack" {
		return packNow(ctx, db.Pool, cfg.PackAfter, *workers)
	}
	r, err := values.Measure(ctx, db.Pool)
	if err != nil {
		return err
	}
	return r.Print(os.Stdout)
}

// packNow runs the packer once and says what it did.
func packNow(ctx context.Context, pool *pgxpool.Pool, after time.Duration, workers int) error {
	if after == 0 {
		after = config.DefaultPackAfter // SENSORAPI_PACK_AFTER=off stops the job, not this command
	}
	p := &values.Packer{Store: &values.Store{Pool: pool}, After: after, Log: slog.Default(), Workers: workers}
	start := time.Now()
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Printf("packed %d days (%d points, %.0f points/s; %d left as rows: timestamps finer than a millisecond), dropped %d emptied chunks in %s\n",
		res.Days, res.Points, float64(res.Points)/took.Seconds(), res.Skipped, len(res.Chunks), took.Round(time.Millisecond))
	return nil
}
