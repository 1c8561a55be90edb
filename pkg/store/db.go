// Package store opens the database, applies migrations and holds the bun queries of
// the CRUD resources.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/migrate"

	migrations "github.com/sensordata/sensorapi/sql"
)

// DB is the bun handle for CRUD plus the pgx pool under it, used directly where
// binary parameters matter (bulk ingestion).
type DB struct {
	*bun.DB
	Pool *pgxpool.Pool
}

// Open connects lazily: it succeeds while the database is down, so the service can
// start, answer 503 and recover by itself.
// queryTimeout becomes the session's statement_timeout, so a runaway query is cancelled
// by the server and its connection freed.
func Open(ctx context.Context, dsn string, queryTimeout time.Duration) (*DB, error) {
	return open(ctx, dsn, queryTimeout, "DATABASE_URL", pgconn.ValidateConnectTargetSessionAttrsReadWrite)
}

// open is Open for a pool of the given role: a DSN naming several hosts without
// target_session_attrs connects to the first that answers, which may be the wrong
// role (a standby for the primary's pool, API.md §19), so role then picks the host.
func open(ctx context.Context, dsn string, queryTimeout time.Duration, name string, role pgconn.ValidateConnectFunc) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	if cfg.ConnConfig.ValidateConnect == nil && multiHost(cfg.ConnConfig.Config) {
		cfg.ConnConfig.ValidateConnect = role
	}
	bound(cfg)
	if queryTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(queryTimeout.Milliseconds(), 10)
	}
	// JIT compilation is planned from row estimates; for the analytics statements over
	// millions of points it cost more than the query itself (measured: resample 1H mean
	// over 500k points, 1285 ms with JIT of which 873 ms compiling, 337 ms without).
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	// A context that ends closes the connection (pgx's default ContextWatcherHandler)
	// rather than sending a cancel request: PostgreSQL answers a cancelled wait for the
	// synchronous standby with a successful COMMIT and a WARNING, which would
	// acknowledge a write the standby may not hold (API.md §19, TestFailover).
	cfg.MaxConns = 32
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	sqldb := stdlib.OpenDBFromPool(pool)
	sqldb.SetMaxOpenConns(int(cfg.MaxConns))
	sqldb.SetConnMaxIdleTime(time.Minute)
	return &DB{DB: bun.NewDB(sqldb, pgdialect.New()), Pool: pool}, nil
}

// dialTimeout is how long reaching the server's port may take: an unreachable database
// gives a quick 503, not a hung request. startupTimeout bounds what follows
// (authentication, a backend forked, TimescaleDB loaded) unless the DSN sets
// connect_timeout: a server that answers but is busy, e.g. a burst of new requests
// opening many connections at once on a loaded machine, is slow, not down (with the
// whole connect bounded by 3 s, such bursts answered 503 and writes did not resume after
// a restart on a loaded 2-core machine). It is not the query timeout: a handle with a
// short statement timeout must still be able to connect.
const (
	dialTimeout    = 3 * time.Second
	startupTimeout = 30 * time.Second
)

// bound sets how long a new connection may take (dialTimeout, startupTimeout).
func bound(cfg *pgxpool.Config) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 5 * time.Minute} // pgconn's default keep-alive
	cfg.ConnConfig.DialFunc = d.DialContext
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = startupTimeout
	}
}

// multiHost tells whether the DSN names more than one server (its fallbacks also
// repeat a host, e.g. without TLS after with it, for sslmode=prefer).
func multiHost(c pgconn.Config) bool {
	for _, f := range c.Fallbacks {
		if f.Host != c.Host || f.Port != c.Port {
			return true
		}
	}
	return false
}

// Close closes both handles.
func (db *DB) Close() error {
	err := db.DB.Close()
	db.Pool.Close()
	return err
}

// migrationLockKey is an arbitrary constant shared by every instance: the advisory lock
// makes instances that start together apply the migrations one after the other.
const migrationLockKey = 727_431_118

// ErrNotUTF8 is Migrate's error for a database whose encoding is not UTF8.
var ErrNotUTF8 = errors.New("the database's encoding is not UTF8")

// checkEncoding refuses a database not encoded in UTF8: in SQL_ASCII, jsonb refuses
// the escape of any non-ASCII character (a context {"k":"\u00e9"} could not be
// stored) and text is kept as unchecked bytes; in any other encoding, text it cannot
// represent is refused. Contexts, names and descriptions are Unicode (API.md §6).
func checkEncoding(ctx context.Context, db *DB) error {
	var name, enc string
	err := db.Pool.QueryRow(ctx, `SELECT current_database(), current_setting('server_encoding')`).Scan(&name, &enc)
	if err != nil {
		return fmt.Errorf("read the database's encoding: %w", err)
	}
	if enc != "UTF8" {
		q := pgx.Identifier{name}.Sanitize()
		return fmt.Errorf("%w: database %s is %s. Create it in UTF8 (under another name, or after dropping it) "+
			"and point DATABASE_URL at it: CREATE DATABASE %s ENCODING 'UTF8' TEMPLATE template0", ErrNotUTF8, q, enc, q)
	}
	return nil
}

// Migrate checks that the database is UTF8 (ErrNotUTF8), then applies pending
// migrations under a Postgres advisory lock and returns the names applied.
func Migrate(ctx context.Context, db *DB) ([]string, error) {
	if err := checkEncoding(ctx, db); err != nil {
		return nil, err
	}
	ms, err := migrations.All()
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", migrationLockKey); err != nil {
		return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", migrationLockKey)
	}()
	m := migrate.NewMigrator(db.DB, ms)
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("migrate: init: %w", err)
	}
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var names []string
	for _, mg := range group.Migrations {
		names = append(names, mg.Name)
	}
	return names, nil
}

// Ready tells whether the database answers and every migration is applied.
func Ready(ctx context.Context, db *DB) error {
	ms, err := migrations.All()
	if err != nil {
		return err
	}
	var applied int
	err = db.NewRaw("SELECT count(*) FROM bun_migrations WHERE migrated_at IS NOT NULL").Scan(ctx, &applied)
	if err != nil {
		return fmt.Errorf("read migrations: %w", err)
	}
	if want := len(ms.Sorted()); applied < want {
		return fmt.Errorf("schema not migrated: %d of %d migrations applied", applied, want)
	}
	return nil
}
