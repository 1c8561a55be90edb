package sqlrole_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sensordata/sensorapi/pkg/sqlrole"
)

// sqlstate is err's SQLSTATE, "" when it is not a PostgreSQL error.
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestRolesAreRefusedEverythingElse: a role reads its views and nothing else. Every
// statement below runs in a transaction of its own opened as an attacker would
// (default_transaction_read_only off, BEGIN READ WRITE), and PostgreSQL refuses it for
// want of a privilege (42501), not because the transaction is read-only; nothing is
// written.
func TestRolesAreRefusedEverythingElse(t *testing.T) {
	tn := newTenant(t, 11)
	ctx := context.Background()
	var chunk string
	if err := env.DB.NewRaw(`SELECT format('%I.%I', chunk_schema, chunk_name) FROM timescaledb_information.chunks
		WHERE hypertable_name = 'values' LIMIT 1`).Scan(ctx, &chunk); err != nil {
		t.Fatal(err)
	}
	refused := []string{
		`SELECT * FROM public.devices`,
		`SELECT * FROM public."values"`,
		`SELECT * FROM public.values_packed`,
		`SELECT * FROM public.value_days`,
		`SELECT * FROM ` + chunk,
		`SELECT * FROM public.tokens`,
		`SELECT password_hash FROM public.users`,
		`SELECT * FROM public.accounts`,
		`SELECT * FROM sensor_admin.sql_roles`,
		`INSERT INTO sensor.devices (id, label, name) VALUES ('x', 'x', 'x')`,
		`UPDATE sensor.devices SET name = 'x'`,
		`DELETE FROM sensor.devices`,
		`INSERT INTO public."values" (variable_id, ts, value) VALUES (1, now(), 1)`,
		`UPDATE public.variables SET last_value = 0`,
		`DELETE FROM public.tokens`,
		`CREATE TEMP TABLE scratch (x int)`,
		`CREATE TABLE sensor.scratch (x int)`,
		`CREATE TABLE public.scratch (x int)`,
		`CREATE VIEW sensor.scratch AS SELECT 1`,
		`CREATE FUNCTION public.scratch() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`SELECT pg_read_file('/etc/passwd')`,
		`SELECT pg_ls_dir('.')`,
		`SELECT lo_import('/etc/passwd')`,
		`COPY (SELECT 1) TO '/tmp/sqlrole-scratch'`,
		`SELECT public_id()`,
		`SELECT * FROM packed_values(ARRAY[1::bigint], '-infinity', 'infinity')`,
		`SELECT ieee_add(1, 2)`,
		`SET ROLE sensor_views`,
	}
	for _, q := range refused {
		tx, err := tn.Conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, `SET default_transaction_read_only = off`)
		if err == nil {
			_, err = tx.Exec(ctx, `COMMIT; BEGIN READ WRITE`)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, q)
		if code := sqlstate(err); code != "42501" {
			t.Errorf("%s: %v (SQLSTATE %q), want refused for want of a privilege (42501)", q, err, code)
		}
		_ = tx.Rollback(ctx)
	}
	// nothing above was written (the view, read as the role, and the count as the service)
	var devices int
	if err := tn.Conn.QueryRow(ctx, `SELECT count(*) FROM sensor.devices WHERE name = 'probe'`).Scan(&devices); err != nil || devices != 1 {
		t.Errorf("the role's device: %d (%v)", devices, err)
	}
	// the views it may read still answer in such a transaction
	if _, err := tn.Conn.Exec(ctx, `BEGIN READ WRITE; SELECT count(*) FROM sensor.values; COMMIT`); err != nil {
		t.Errorf("reading a view: %v", err)
	}
}

// TestStatementTimeoutCancels: a statement running past the role's statement_timeout is
// cancelled by the server (57014), and the role's other settings are in force.
func TestStatementTimeoutCancels(t *testing.T) {
	tn := newTenantWith(t, 13, 300*time.Millisecond)
	ctx := context.Background()
	_, err := tn.Conn.Exec(ctx, `SELECT pg_sleep(30)`)
	if code := sqlstate(err); code != "57014" {
		t.Fatalf("pg_sleep(30): %v (SQLSTATE %q), want cancelled by statement_timeout (57014)", err, code)
	}
	for setting, want := range map[string]string{"statement_timeout": "300ms", "search_path": "sensor, public",
		"default_transaction_read_only": "on"} {
		var got string
		if err := tn.Conn.QueryRow(ctx, `SELECT current_setting($1)`, setting).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", setting, got, err, want)
		}
	}
	var limit int
	if err := env.DB.NewRaw(`SELECT rolconnlimit FROM pg_roles WHERE rolname = ?`, tn.Role).Scan(ctx, &limit); err != nil || limit != 3 {
		t.Errorf("connection limit %d (%v), want 3", limit, err)
	}
	// search_path finds the views and TimescaleDB's functions unqualified
	if _, err := tn.Conn.Exec(ctx, `SELECT time_bucket('1 hour', now()), (SELECT count(*) FROM devices)`); err != nil {
		t.Errorf("unqualified names: %v", err)
	}
}

// TestDroppedRoleCannotConnect: Drop ends the role's open sessions and the role is
// gone: a new connection with its password is refused, a second Drop is NotFound, and
// Drop refuses a role it did not create.
func TestDroppedRoleCannotConnect(t *testing.T) {
	tn := newTenant(t, 17)
	ctx := context.Background()
	dsn, err := sqlrole.ConnString(env.DSN, tn.Role, tn.RolePassword)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := sqlrole.List(ctx, env.DB.Pool)
	if err != nil || !slices.ContainsFunc(roles, func(r sqlrole.Role) bool {
		return r.Name == tn.Role && r.Account == tn.Name && r.Connections == 3 && r.StatementTimeout == 30*time.Second && r.Sessions == 1
	}) {
		t.Fatalf("list: %+v %v, want %s of %s with its open session", roles, err, tn.Role, tn.Name)
	}
	if err := sqlrole.Drop(ctx, env.DB.Pool, tn.Role); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.Conn.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("the dropped role's open session still answers")
	}
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		_ = c.Close(ctx)
		t.Fatal("the dropped role connected")
	} else if code := sqlstate(err); code != "28P01" && code != "28000" {
		t.Errorf("connecting as the dropped role: %v (SQLSTATE %q), want an authentication failure", err, code)
	}
	if err := sqlrole.Drop(ctx, env.DB.Pool, tn.Role); err == nil || !strings.Contains(err.Error(), "No SQL role") {
		t.Errorf("second drop: %v", err)
	}
	if err := sqlrole.Drop(ctx, env.DB.Pool, "postgres"); err == nil {
		t.Error("Drop dropped a role it did not create")
	}
	var exists bool
	if err := env.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ?)`, tn.Role).Scan(ctx, &exists); err != nil || exists {
		t.Errorf("role still exists: %v %v", exists, err)
	}
}

// TestSpecIsChecked: bad flags are refused naming the flag, and nothing is created.
func TestSpecIsChecked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		spec  sqlrole.Spec
		field string
	}{
		{sqlrole.Spec{Account: "", StatementTimeout: time.Second, Connections: 1}, "account"},
		{sqlrole.Spec{Account: "admin", StatementTimeout: 0, Connections: 1}, "statement-timeout"},
		{sqlrole.Spec{Account: "admin", StatementTimeout: 2 * time.Hour, Connections: 1}, "statement-timeout"},
		{sqlrole.Spec{Account: "admin", StatementTimeout: time.Second, Connections: 0}, "connections"},
		{sqlrole.Spec{Account: "no-such-account", StatementTimeout: time.Second, Connections: 1}, "account"},
	} {
		before, _ := sqlrole.List(ctx, env.DB.Pool)
		_, _, err := sqlrole.Create(ctx, env.DB.Pool, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.spec, err, c.field)
		}
		if after, _ := sqlrole.List(ctx, env.DB.Pool); len(after) != len(before) {
			t.Errorf("%+v: a role was created", c.spec)
		}
	}
}

// viewColumns pins the views' columns and types (API.md §22): a migration that changes
// the internal layout must keep them. Change this list only with the contract.
var viewColumns = map[string]string{
	"devices":   "id text, label text, name text, description text, tags text[], properties jsonb, created_at timestamp with time zone",
	"variables": "id text, device_id text, device_label text, label text, name text, unit text, type text, synthetic_expression text, last_value double precision, last_timestamp timestamp with time zone",
	"values":    valuesColumns,
	// sensor.values with each value's UTC day, which sensor.values_between reads
	"values_by_day": valuesColumns + ", day timestamp with time zone",
	"values_1m":     tierColumns,
	"values_15m":    tierColumns,
	"values_1d":     tierColumns,
}

const valuesColumns = "variable_id text, device_label text, variable_label text, ts timestamp with time zone, value double precision, context jsonb"

const tierColumns = "variable_id text, device_label text, variable_label text, bucket timestamp with time zone, count bigint, sum double precision, min double precision, max double precision, mean double precision, first double precision, last double precision"

func TestViewColumnsArePinned(t *testing.T) {
	rows, err := env.DB.QueryContext(context.Background(), `SELECT c.relname,
			string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relnamespace = 'sensor'::regnamespace GROUP BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	got := map[string]string{}
	for rows.Next() {
		var name, cols string
		if err := rows.Scan(&name, &cols); err != nil {
			t.Fatal(err)
		}
		got[name] = cols
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name, want := range viewColumns {
		if got[name] != want {
			t.Errorf("sensor.%s:\n have %s\n want %s", name, got[name], want)
		}
	}
	if len(got) != len(viewColumns) {
		t.Errorf("schema sensor holds %d relations, the contract %d: %v", len(got), len(viewColumns), got)
	}
	var result string
	if err := env.DB.NewRaw(`SELECT pg_get_function_result('sensor.values_between(timestamptz, timestamptz)'::regprocedure)`).
		Scan(context.Background(), &result); err != nil || result != "TABLE("+valuesColumns+")" {
		t.Errorf("sensor.values_between returns %s (%v), want the columns of sensor.values", result, err)
	}
	var barriers int
	if err := env.DB.NewRaw(`SELECT count(*) FROM pg_class WHERE relnamespace = 'sensor'::regnamespace
		AND relkind = 'v' AND 'security_barrier=true' = ANY(reloptions)`).Scan(context.Background(), &barriers); err != nil || barriers != len(viewColumns) {
		t.Errorf("%d security_barrier views (%v), want %d", barriers, err, len(viewColumns))
	}
}

// TestServiceKeepsEveryRow: row-level security is forced on every table the views read,
// and a role of the service's that is subject to it (here a non-superuser grantee; the
// tables' owner is subject to the same policies once FORCE is on) still reads and writes
// every account's rows through policy "service".
func TestServiceKeepsEveryRow(t *testing.T) {
	newTenant(t, 19)
	pack(t)
	ctx := context.Background()
	tables := []string{"devices", "variables", `"values"`, "values_packed", "value_minutes", "value_quarters", "value_days"}
	var forced int
	if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE oid = ANY($1::regclass[])
		AND relrowsecurity AND relforcerowsecurity`, tables).Scan(&forced); err != nil || forced != len(tables) {
		t.Fatalf("%d of %d tables with row-level security forced (%v)", forced, len(tables), err)
	}
	role := "svc_" + strings.ReplaceAll(strings.ToLower(t.Name()), "test", "")
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'svc' NOSUPERUSER NOBYPASSRLS`,
		`GRANT SELECT, INSERT, DELETE ON ` + strings.Join(tables, ", ") + ` TO ` + role,
	} {
		if _, err := env.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = env.DB.ExecContext(context.Background(), `REVOKE ALL ON `+strings.Join(tables, ", ")+` FROM `+role)
		_, _ = env.DB.ExecContext(context.Background(), `DROP ROLE `+role)
	})
	cfg, err := pgx.ParseConfig(env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, "svc"
	svc, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Close(ctx) }()
	for _, table := range tables {
		var all, seen int64
		q := `SELECT count(*) FROM ` + table
		if err := env.DB.NewRaw(q).Scan(ctx, &all); err != nil {
			t.Fatal(err)
		}
		if err := svc.QueryRow(ctx, q).Scan(&seen); err != nil || seen != all || all == 0 {
			t.Errorf("%s: the service's role sees %d rows (%v), the superuser %d", table, seen, err, all)
		}
	}
	if _, err := svc.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value) VALUES (-1, now(), 1)`); err != nil {
		t.Errorf("the service's role cannot write: %v", err)
	}
	if _, err := svc.Exec(ctx, `DELETE FROM "values" WHERE variable_id = -1`); err != nil {
		t.Error(err)
	}
}
