package main_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/auth"
)

// TestSQLRoleCLI: `sensorapi sql-role create` through the real binary prints a connection
// string that logs in and reads the account's devices through schema sensor; list shows
// the role with its account, settings and session; drop ends the session and the role
// cannot connect again; bad flags are refused naming the flag.
func TestSQLRoleCLI(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	tok, err := auth.CreateAccount(ctx, env.DB, "sqlrole_cli")
	if err != nil {
		t.Fatal(err)
	}
	env.Seed(t, tok, "cli-probe", "v", nil)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"sql-role"}, args...)...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if err != nil {
			return out.String() + errOut.String(), err
		}
		return out.String(), nil
	}
	out, err := run("create", "--account", "sqlrole_cli", "--statement-timeout", "2s", "--connections", "2")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	dsn := strings.TrimSpace(out)
	if strings.Count(dsn, "\n") != 0 || !strings.HasPrefix(dsn, "postgres://sensor_sqlrole_cli_") {
		t.Fatalf("create printed %q, want one connection string", out)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect with the printed string: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var label string
	if err := conn.QueryRow(ctx, `SELECT string_agg(label, ',') FROM sensor.devices`).Scan(&label); err != nil || label != "cli-probe" {
		t.Fatalf("the role reads devices %q (%v), want its account's cli-probe", label, err)
	}
	role := conn.Config().User
	out, err = run("list")
	if err != nil || !strings.Contains(out, role) || !strings.Contains(out, "sqlrole_cli") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, role) && len(strings.Fields(line)) >= 5 {
			if f := strings.Fields(line); f[2] != "2s" || f[3] != "2" || f[4] != "1" {
				t.Errorf("list line %q: want timeout 2s, 2 connections, 1 session", line)
			}
		}
	}
	if out, err := run("drop", role); err != nil {
		t.Fatalf("drop: %v\n%s", err, out)
	}
	if _, err := conn.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("the dropped role's session still answers")
	}
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		_ = c.Close(ctx)
		t.Error("the dropped role connected again")
	}
	if out, err := run("list"); err != nil || strings.Contains(out, role) {
		t.Errorf("list after drop: %v\n%s", err, out)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"create", "--account", "sqlrole_cli", "--connections", "0"}},
		{[]string{"create", "--account", "no-such-account"}},
		{[]string{"create", "--account", "sqlrole_cli", "--statement-timeout", "5h"}},
		{[]string{"drop", "postgres"}},
	} {
		if out, err := run(c.args...); err == nil {
			t.Errorf("%v: accepted\n%s", c.args, out)
		}
	}
}
