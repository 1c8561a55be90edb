package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sensordata/sensorapi/pkg/ingest"
)

func rollupsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rollups", flag.ContinueOnError)
	since := fs.String("since", "", "rebuild the minutes from this time on (RFC 3339); default: all")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi rollups rebuild [--since TIME]

Recomputes the per-minute rollups (table value_minutes) of every variable from its
values, one variable per transaction, while the service keeps running. The write path
keeps them exact; rebuild repairs what it did not see: values written by a binary
older than the rollups during a rolling upgrade, or rows loaded into "values" by hand
(docs/operations.md). Prints a progress line every 1000 variables and at least every 10 s.

Examples:
  DATABASE_URL=postgres://... sensorapi rollups rebuild --since 2026-11-22T00:00:00Z
  DATABASE_URL=postgres://... sensorapi rollups rebuild

Flags:
`)
		fs.PrintDefaults()
	}
	// flags after "rebuild" too, as "account create" reads them
	if len(args) > 0 && args[0] == "rebuild" {
		args = args[1:]
	} else {
		args = append(args, "") // no "rebuild": usage below
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("rollups: want 'rebuild [--since TIME]'")
	}
	var from time.Time
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return fmt.Errorf("--since: %w", err)
		}
		from = t
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	start, said := time.Now(), time.Now()
	st := &ingest.Store{Pool: db.Pool}
	err = st.RebuildMinutes(ctx, from, func(done, total int) {
		// a line every 1000 variables, and at least every 10 s (one variable may be long)
		if done%1000 == 0 || done == total || time.Since(said) >= 10*time.Second {
			said = time.Now()
			fmt.Fprintf(os.Stderr, "rebuilt %d of %d variables (%.0fs)\n", done, total, time.Since(start).Seconds())
		}
	})
	if err != nil {
		return err
	}
	fmt.Println("minute rollups rebuilt")
	return nil
}
