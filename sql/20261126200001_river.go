package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// registerRiver adds the migration that creates River's tables (river_job, …: the
// durable job queue of pkg/events' deliveries). River versions its schema itself
// (table river_migration); this bun migration runs River's own migrator up to the
// version the linked River needs, under the same advisory lock as every migration
// (pkg/store.Migrate), so `sensorapi migrate` and `serve` apply it like the SQL files.
// After an upgrade of River whose release notes name a new schema version, add a
// migration file that calls migrateRiver again: it applies only what is missing.
// The bun migration's name comes from this file's name (20261126200001_river).
func registerRiver(m *migrate.Migrations) {
	m.MustRegister(migrateRiver, nil)
}

// migrateRiver applies River's pending schema migrations, on a small pool of its own
// made from the connection settings of bun's (River's migrator runs some of its
// steps in transactions of their own, so it needs a pool, not one connection).
func migrateRiver(ctx context.Context, db *bun.DB) error {
	cfg, err := connConfig(ctx, db.DB)
	if err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	pcfg.ConnConfig, pcfg.MaxConns = cfg, 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	defer pool.Close()
	mg, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := mg.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// connConfig is the pgx connection configuration under a database/sql handle opened
// by pgx's stdlib (pkg/store.Open).
func connConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	defer func() { _ = conn.Close() }()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("river migrations: the database handle is not pgx's")
		}
		cfg = c.Conn().Config().Copy()
		return nil
	})
	return cfg, err
}
