package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/querybuilder"
)

const syntheticUsage = `Usage: sensorapi synthetic check [--limit N]

Compares every synthetic Variable (API.md §17, docs/synthetic.md) with a
recomputation from its inputs' current values and lists each timestamp that differs
(stored value, computed value; "-" where one side has none). Exit status 1 when one
does. Run it when no write is in flight: values written a moment ago may still be on
their way (the live upkeep makes them visible within a second).

Example:
  DATABASE_URL=postgres://... sensorapi synthetic check

Flags:
`

func syntheticCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("synthetic", flag.ContinueOnError)
	limit := fs.Int("limit", 100, "differences listed per variable, at most")
	fs.Usage = func() { fmt.Fprint(fs.Output(), syntheticUsage); fs.PrintDefaults() }
	if len(args) > 0 && args[0] == "check" {
		args = args[1:]
	} else {
		args = append(args, "")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("synthetic: want 'check [--limit N]'")
	}
	db, err := openDB(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	checked, err := synthetic.Check(ctx, db.Pool, nil, *limit)
	if err != nil {
		return err
	}
	differ := 0
	for _, c := range checked {
		if len(c.Differences) == 0 {
			fmt.Printf("%s: ok\n", c.Name)
			continue
		}
		differ++
		fmt.Printf("%s: differs at %d timestamp(s)%s\n", c.Name, len(c.Differences), more(len(c.Differences), *limit))
		for _, d := range c.Differences {
			fmt.Printf("  %d stored %s computed %s\n", d.TS, num(d.Stored), num(d.Computed))
		}
	}
	if differ > 0 {
		return fmt.Errorf("synthetic check: %d of %d synthetic variables differ from their recomputation", differ, len(checked))
	}
	fmt.Fprintf(os.Stderr, "%d synthetic variables match their recomputation\n", len(checked))
	return nil
}

func more(n, limit int) string {
	if n >= limit {
		return " (the first " + fmt.Sprint(limit) + " shown)"
	}
	return ""
}

func num(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprint(*x)
}

// compileAccount stands for the account in a compiled synthetic statement, written
// as a lookup of the account's name.
const compileAccount = int64(-424242)

// compileSynthetic prints the statement computing the expression's whole history,
// references resolved within the account by the statement itself.
func compileSynthetic(text, account string) error {
	expr, err := synthetic.Parse(text, func(ref string) (querybuilder.Ref, bool, error) {
		r := querybuilder.Ref{Account: compileAccount}
		if dev, v, ok := strings.Cut(strings.ToLower(ref), "."); ok {
			r.Device, r.Name = dev, v
		} else {
			r.ID = ref
		}
		return r, true, nil
	})
	if err != nil {
		return fmt.Errorf("compile: the endpoint would answer 400001 on syntheticExpression: %w", err)
	}
	q, err := querybuilder.Synthetic(querybuilder.SyntheticRequest{Expr: expr})
	if err != nil {
		return err
	}
	name := "'" + strings.ReplaceAll(account, "'", "''") + "'"
	sql, err := q.InlineWith(func(arg any) (string, bool) {
		if id, ok := arg.(int64); ok && id == compileAccount {
			return "(SELECT id FROM accounts WHERE name = " + name + ")", true
		}
		return "", false
	})
	if err != nil {
		return err
	}
	fmt.Println("-- " + querybuilder.SyntheticNote + "\n" + sql + ";")
	return nil
}
