package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/fault"
)

func compileCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "statistics", "statistics, resample or aggregation")
	acct := fs.String("account", "admin", "account whose ids and labels the statement resolves")
	expr := fs.String("synthetic", "", "a synthetic variable's expression (API.md §17): print the statement computing its history")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi compile [--endpoint statistics|resample|aggregation] [--account NAME] < request.json

Prints the SQL statement the endpoint runs for the request body on stdin, with its
arguments written as literals, ready to paste into psql. Needs no database.

  sensorapi compile --synthetic 'EXPR' [--account NAME]

With --synthetic, prints the statement that computes a synthetic variable's whole
history from the expression (its backfill; references by id or device.variable label
resolved within the account by the statement itself).

Example:
  sensorapi compile --synthetic '({{boiler.temperature}} * 9/5) + 32' | psql "$DATABASE_URL"
  echo '{"start":0,"end":1767225600000,"variables":[{"variable":"~temperature","device":"~boiler"}],"aggregations":["mean","p50"]}' |
    sensorapi compile --endpoint statistics | psql "$DATABASE_URL"

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *expr != "" {
		return compileSynthetic(*expr, *acct)
	}
	if !analytics.IsEndpoint(*endpoint) {
		return fmt.Errorf("compile: unknown --endpoint %q", *endpoint)
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fmt.Errorf("compile: read stdin: %w", err)
	}
	sql, err := analytics.Psql(*endpoint, body, *acct)
	if err != nil {
		return describe(err)
	}
	fmt.Println(sql)
	return nil
}

// describe turns a validation error into the body the endpoint would answer.
func describe(err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return fmt.Errorf("compile: the endpoint would answer %v", apierr.Render(fe).Body())
	}
	return fmt.Errorf("compile: %w", err)
}
