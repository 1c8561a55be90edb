package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/querybuilder"
)

// accountPlaceholder stands for the account id while compiling; the printed SQL looks
// the account up by name instead, so it runs as is in psql.
const accountPlaceholder = int64(math.MinInt64 + 727)

// compilers turn a request body into the one statement its endpoint runs.
var compilers = map[string]func(body []byte, account int64) (querybuilder.Query, error){
	"statistics": func(body []byte, account int64) (querybuilder.Query, error) {
		req, _, err := analytics.ParseStatistics(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Statistics(req)
	},
	"resample": func(body []byte, account int64) (querybuilder.Query, error) {
		req, err := analytics.ParseResample(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Resample(req.Query)
	},
	"aggregation": func(body []byte, account int64) (querybuilder.Query, error) {
		req, err := analytics.ParseAggregation(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Aggregation(req.Query)
	},
}

func compileCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "statistics", "statistics, resample or aggregation")
	acct := fs.String("account", "admin", "account whose ids and labels the statement resolves")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi compile [--endpoint statistics|resample|aggregation] [--account NAME] < request.json

Prints the SQL statement the endpoint runs for the request body on stdin, with its
arguments written as literals, ready to paste into psql. Needs no database.

Example:
  echo '{"start":0,"end":1767225600000,"variables":[{"variable":"~temperature","device":"~boiler"}],"aggregations":["mean","p50"]}' |
    sensorapi compile --endpoint statistics | psql "$DATABASE_URL"

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	compile, ok := compilers[*endpoint]
	if !ok {
		return fmt.Errorf("compile: unknown --endpoint %q", *endpoint)
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fmt.Errorf("compile: read stdin: %w", err)
	}
	q, err := compile(body, accountPlaceholder)
	if err != nil {
		return describe(err)
	}
	name := "'" + strings.ReplaceAll(*acct, "'", "''") + "'"
	sql, err := q.InlineWith(func(arg any) (string, bool) {
		if id, ok := arg.(int64); ok && id == accountPlaceholder {
			return "(SELECT id FROM accounts WHERE name = " + name + ")", true
		}
		return "", false
	})
	if err != nil {
		return err
	}
	fmt.Println(sql + ";")
	return nil
}

// describe turns a validation error into the body the endpoint would answer.
func describe(err error) error {
	var ae interface{ Body() any }
	if errors.As(err, &ae) {
		return fmt.Errorf("compile: the endpoint would answer %v", ae.Body())
	}
	return fmt.Errorf("compile: %w", err)
}
