package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/sensordata/sensorapi/pkg/storage"
)

const storageUsage = `Usage: sensorapi storage report

report prints what a stored point costs on disk: for the raw values and each rollup
tier, its rows and its heap, index and TOAST bytes divided by the raw points stored
(docs/operations.md "Storage per point"). It counts rows exactly: on a large database
it reads every table once.

Example:
  DATABASE_URL=postgres://... sensorapi storage report
`

func storageCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), storageUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "report" {
		fs.Usage()
		return errors.New("storage: want 'report'")
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	r, err := storage.Measure(ctx, db.Pool)
	if err != nil {
		return err
	}
	return r.Print(os.Stdout)
}
