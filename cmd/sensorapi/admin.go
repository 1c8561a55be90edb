package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/store"
)

func migrateCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sensorapi migrate\n\nApplies pending schema migrations to DATABASE_URL under an advisory lock and lists them.\n\nExample:\n  DATABASE_URL=postgres://... sensorapi migrate\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openDB(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	fmt.Fprintln(os.Stderr, "waiting for the migration lock, then applying pending migrations...")
	start := time.Now()
	applied, err := store.Migrate(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "done in %.1fs\n", time.Since(start).Seconds())
	for _, name := range applied {
		fmt.Println("applied", name)
	}
	fmt.Printf("schema up to date (%d applied now)\n", len(applied))
	return nil
}

func accountCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("account", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sensorapi account create NAME\n\nCreates an account with one token and prints only the token.\n\nExample:\n  TOKEN=$(DATABASE_URL=postgres://... sensorapi account create acme)\n")
	}
	// flags after "create" too: "account create --help" must not create "--help"
	if len(args) > 0 && args[0] == "create" {
		args = args[1:]
	} else {
		args = append(args, "") // an empty NAME: usage below
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fs.Usage()
		return errors.New("account: want 'create NAME'")
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	tok, err := auth.CreateAccount(ctx, db, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

func openDB(ctx context.Context) (*store.DB, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	return store.Open(ctx, cfg.DatabaseURL, cfg.QueryTimeout)
}

// openMigrated opens DATABASE_URL and applies pending migrations quietly.
func openMigrated(ctx context.Context) (*store.DB, error) {
	db, err := openDB(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}
