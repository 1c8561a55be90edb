package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/sensordata/sensorapi/pkg/progress"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/values"
)

const rollupsUsage = `Usage: sensorapi rollups rebuild|check [--since TIME]

rebuild recomputes every rollup tier (tables value_minutes, value_quarters and
value_days) of every variable from its values, one variable per transaction, while the
service keeps running; --since is rounded down to its UTC day. The write path and the
catch-up job keep every tile that ends by its variable's mark exact (rollups_until,
docs/queries.md); rebuild repairs what they did not see: values written by a binary older
than the tiers during a rolling upgrade, or rows loaded into "values" by hand
(docs/operations.md).

Both start at the raw horizon at the earliest (sensorapi retention --help): before it
the values were removed and the rollups are kept as they are.

check compares every tier with the values, variable by variable, up to each variable's
mark (later tiles are not built yet), prints each tile that differs (count, min, max, first, last, the timestamps of min and max, or sum and
spread beyond 1e-9 relative) and exits 1 if any does.

Both print a progress line every 10 s: how many variables they have done.

Examples:
  DATABASE_URL=postgres://... sensorapi rollups check
  DATABASE_URL=postgres://... sensorapi rollups rebuild --since 2026-11-22T00:00:00Z

Flags:
`

func rollupsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rollups", flag.ContinueOnError)
	since := fs.String("since", "", "from this time on (RFC 3339); default: all")
	fs.Usage = func() { fmt.Fprint(fs.Output(), rollupsUsage); fs.PrintDefaults() }
	// flags after the subcommand, as "account create" reads them
	sub := ""
	if len(args) > 0 && (args[0] == "rebuild" || args[0] == "check") {
		sub, args = args[0], args[1:]
	} else {
		args = append(args, "") // no subcommand: usage below
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("rollups: want 'rebuild|check [--since TIME]'")
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
	// before the raw horizon the values are gone and the rollups are all there is
	if h, ok, err := retention.Horizon(ctx, db.Pool); err != nil {
		return err
	} else if ok && from.Before(h) {
		fmt.Fprintf(os.Stderr, "from the raw horizon %s on: the values before it were removed by retention\n",
			h.Format(time.RFC3339))
		from = h
	}
	st := &values.Store{Pool: db.Pool}
	if sub == "check" {
		return checkRollups(ctx, st, from)
	}
	count, end := reportVariables("rebuilding the rollup tiers")
	err = st.RebuildTiers(ctx, from, count)
	end()
	if err != nil {
		return err
	}
	fmt.Println("rollup tiers rebuilt")
	return nil
}

// checkRollups prints the tiles whose rollups differ from the values.
func checkRollups(ctx context.Context, st *values.Store, from time.Time) error {
	count, end := reportVariables("checking the rollup tiers")
	bad, err := st.CheckTiers(ctx, from, count)
	end()
	if err != nil {
		return err
	}
	for _, m := range bad {
		fmt.Printf("variable %d %s tile %s: %s values, rollup counts %s\n", m.Variable, m.Table, m.Tile.Format(time.RFC3339),
			orNone(m.N), orNone(m.Rolled))
	}
	if len(bad) > 0 {
		return fmt.Errorf("rollups check: %d tiles differ from their values (sensorapi rollups rebuild repairs them)", len(bad))
	}
	fmt.Println("rollup tiers match the values")
	return nil
}

func orNone(n *int32) string {
	if n == nil {
		return "no"
	}
	return fmt.Sprint(*n)
}

// reportVariables reports a step over the variables every 10 s (one variable may take
// long): count is the store's callback, end ends the step.
func reportVariables(name string) (count func(done, total int), end func()) {
	var done, total atomic.Int64
	r := progress.New(os.Stderr, "rollups", progress.Every)
	r.Begin(name, func() string { return fmt.Sprintf("%d of %d variables", done.Load(), total.Load()) })
	return func(d, t int) { done.Store(int64(d)); total.Store(int64(t)) }, r.End
}
