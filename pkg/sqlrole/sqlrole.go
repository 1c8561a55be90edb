// Package sqlrole keeps the read-only PostgreSQL login roles of accounts (API.md §22,
// docs/sql.md): each role reads the views of schema `sensor` (migration
// sql/20261203000001_sql_roles.up.sql) and PostgreSQL's row-level security shows it
// only its account's rows. The role name → account mapping lives in
// sensor_admin.sql_roles, which the roles cannot read; every role is a member of
// sensor_reader (SELECT on the views) and of nothing else.
package sqlrole

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// Defaults and bounds of a role's settings.
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultConnections      = 5
	MaxStatementTimeout     = time.Hour
	MaxConnections          = 100
)

// Spec is what a new role gets.
type Spec struct {
	Account          string        // the account's name
	StatementTimeout time.Duration // the role's default statement_timeout
	Connections      int           // CONNECTION LIMIT
}

// Role is a role as sql-role list shows it.
type Role struct {
	Name             string
	Account          string
	StatementTimeout time.Duration
	Connections      int
	Sessions         int // sessions open now on this server
	CreatedAt        time.Time
}

// Check validates a spec, naming the flag at fault.
func (s Spec) Check() error {
	f := fault.Fields{}
	if s.Account == "" {
		f.Add("account", "An account name is required.")
	}
	if s.StatementTimeout < time.Millisecond || s.StatementTimeout > MaxStatementTimeout {
		f.Add("statement-timeout", fmt.Sprintf("Must be between 1ms and %s.", MaxStatementTimeout))
	}
	if s.Connections < 1 || s.Connections > MaxConnections {
		f.Add("connections", fmt.Sprintf("Must be between 1 and %d.", MaxConnections))
	}
	return f.Err()
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// roleName is sensor_<account, folded to [a-z0-9_]>_<6 random hex>: readable in
// pg_stat_activity, unique on the server (roles are cluster-wide).
func roleName(account string) (string, error) {
	base := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(account), "_"), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	suffix, err := randomHex(3)
	if err != nil {
		return "", err
	}
	if base == "" {
		return "sensor_" + suffix, nil
	}
	return "sensor_" + base + "_" + suffix, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Create makes the login role of s.Account and returns its name and password (the
// password is not kept: only its SCRAM verifier reaches the server). The role, its
// settings, its membership and its mapping commit together.
func Create(ctx context.Context, pool *pgxpool.Pool, s Spec) (name, password string, err error) {
	if err := s.Check(); err != nil {
		return "", "", err
	}
	if name, err = roleName(s.Account); err != nil {
		return "", "", err
	}
	if password, err = randomHex(16); err != nil {
		return "", "", err
	}
	verifier, err := scramVerifier(password)
	if err != nil {
		return "", "", err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var account int64
		err := tx.QueryRow(ctx, `SELECT id FROM accounts WHERE name = $1`, s.Account).Scan(&account)
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.Invalid("account", fmt.Sprintf("No account named %q.", s.Account))
		}
		if err != nil {
			return fmt.Errorf("sql-role: account: %w", err)
		}
		return createRole(ctx, tx, name, verifier, account, s)
	})
	if err != nil {
		return "", "", err
	}
	return name, password, nil
}

// createRole runs the DDL: role-level settings are defaults PostgreSQL applies at every
// login, on the primary and on replicas alike (pg_db_role_setting is replicated).
func createRole(ctx context.Context, tx pgx.Tx, name, verifier string, account int64, s Spec) error {
	id := pgx.Identifier{name}.Sanitize()
	timeout := fmt.Sprintf("%dms", s.StatementTimeout.Milliseconds())
	stmts := []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
			CONNECTION LIMIT %d PASSWORD %s IN ROLE sensor_reader`, id, s.Connections, quoteLiteral(verifier)),
		fmt.Sprintf(`ALTER ROLE %s SET statement_timeout = %s`, id, quoteLiteral(timeout)),
		fmt.Sprintf(`ALTER ROLE %s SET search_path = sensor, public`, id),
		fmt.Sprintf(`ALTER ROLE %s SET default_transaction_read_only = on`, id),
		fmt.Sprintf(`ALTER ROLE %s SET idle_in_transaction_session_timeout = '5min'`, id),
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("sql-role create %s: %w", name, err)
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO sensor_admin.sql_roles (role_name, account_id, statement_timeout, connection_limit)
		VALUES ($1, $2, $3, $4)`, name, account, s.StatementTimeout, s.Connections)
	if err != nil {
		return fmt.Errorf("sql-role create %s: mapping: %w", name, err)
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// List returns the roles of every account, oldest first.
func List(ctx context.Context, pool *pgxpool.Pool) ([]Role, error) {
	rows, err := pool.Query(ctx, `SELECT r.role_name, a.name, r.statement_timeout, r.connection_limit,
			(SELECT count(*) FROM pg_stat_activity s WHERE s.usename = r.role_name), r.created_at
		FROM sensor_admin.sql_roles r JOIN accounts a ON a.id = r.account_id
		ORDER BY r.created_at, r.role_name`)
	if err != nil {
		return nil, fmt.Errorf("sql-role list: %w", err)
	}
	roles, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Role, error) {
		var r Role
		err := row.Scan(&r.Name, &r.Account, &r.StatementTimeout, &r.Connections, &r.Sessions, &r.CreatedAt)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("sql-role list: %w", err)
	}
	return roles, nil
}

// Drop removes a role made by Create: it can no longer log in and sees nothing from
// the first commit, its open sessions are terminated, then it is dropped. A role that
// Create did not make (not in the mapping) is refused, whatever its name.
func Drop(ctx context.Context, pool *pgxpool.Pool, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sensor_admin.sql_roles WHERE role_name = $1`, name)
		if err != nil {
			return fmt.Errorf("sql-role drop %s: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fault.NotFound(fmt.Sprintf("No SQL role named %q (see sql-role list).", name))
		}
		if _, err := tx.Exec(ctx, `ALTER ROLE `+id+` NOLOGIN`); err != nil {
			return fmt.Errorf("sql-role drop %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = $1`, name); err != nil {
		return fmt.Errorf("sql-role drop %s: terminate sessions: %w", name, err)
	}
	if _, err := pool.Exec(ctx, `DROP ROLE `+id); err != nil {
		return fmt.Errorf("sql-role drop %s: %w", name, err)
	}
	return nil
}
