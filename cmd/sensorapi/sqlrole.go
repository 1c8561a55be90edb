package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/sqlrole"
	"github.com/sensordata/sensorapi/pkg/store"
)

const sqlRoleUsage = `Usage: sensorapi sql-role create --account NAME [--statement-timeout 30s] [--connections 5]
       sensorapi sql-role list
       sensorapi sql-role drop NAME

create makes a PostgreSQL login role that reads the account's data, and only its
account's, through the views of schema sensor (API.md §22, docs/sql.md), and prints its
connection string on stdout: the password is shown this once (only its SCRAM verifier
is stored). One line per server: DATABASE_URL's, then each of DATABASE_REPLICA_URL's
(the role and its settings replicate; a replica needs only pg_hba.conf to admit it).
list shows every role with its account, settings and the sessions open now; drop ends
the role's sessions and removes it. DATABASE_URL's role needs CREATEROLE (or superuser).

Examples:
  DATABASE_URL=postgres://... sensorapi sql-role create --account acme --statement-timeout 1m
  DATABASE_URL=postgres://... sensorapi sql-role list
  DATABASE_URL=postgres://... sensorapi sql-role drop sensor_acme_3f9a1c

Flags:
`

func sqlRoleCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sql-role", flag.ContinueOnError)
	account := fs.String("account", "", "the account's `NAME` (create)")
	timeout := fs.Duration("statement-timeout", sqlrole.DefaultStatementTimeout, "the role's statement_timeout (create)")
	conns := fs.Int("connections", sqlrole.DefaultConnections, "the role's connection limit (create)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), sqlRoleUsage); fs.PrintDefaults() }
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		if err := fs.Parse(args); err != nil { // --help
			return err
		}
		fs.Usage()
		return errors.New("sql-role: want create, list or drop")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	sub := map[string]func(context.Context, *store.DB) error{
		"create": func(ctx context.Context, db *store.DB) error {
			return createSQLRole(ctx, db, sqlrole.Spec{Account: *account, StatementTimeout: *timeout, Connections: *conns})
		},
		"list": listSQLRoles,
		"drop": func(ctx context.Context, db *store.DB) error {
			if fs.NArg() != 1 {
				return errors.New("sql-role drop: want the role's NAME (see sql-role list)")
			}
			if err := sqlrole.Drop(ctx, db.Pool, fs.Arg(0)); err != nil {
				return err
			}
			fmt.Println("dropped", fs.Arg(0))
			return nil
		},
	}[args[0]]
	if sub == nil {
		fs.Usage()
		return fmt.Errorf("sql-role: unknown subcommand %q", args[0])
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	return sub(ctx, db)
}

// createSQLRole creates the role and prints its connection strings, the primary's first.
func createSQLRole(ctx context.Context, db *store.DB, s sqlrole.Spec) error {
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	name, password, err := sqlrole.Create(ctx, db.Pool, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %s for account %s (statement_timeout %s, %d connections); the password is shown once:\n",
		name, s.Account, s.StatementTimeout, s.Connections)
	for _, dsn := range append([]string{cfg.DatabaseURL}, cfg.ReplicaURLs...) {
		conn, err := sqlrole.ConnString(dsn, name, password)
		if err != nil {
			return err
		}
		fmt.Println(conn)
	}
	return nil
}

func listSQLRoles(ctx context.Context, db *store.DB) error {
	roles, err := sqlrole.List(ctx, db.Pool)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ROLE\tACCOUNT\tSTATEMENT_TIMEOUT\tCONNECTIONS\tSESSIONS\tCREATED")
	for _, r := range roles {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Account, r.StatementTimeout, r.Connections, r.Sessions,
			r.CreatedAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}
