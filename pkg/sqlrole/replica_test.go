package sqlrole_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/sqlrole"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRoleWorksOnAReplica: a role created on the primary logs in on a streaming replica
// with nothing done there (its pg_hba.conf admits password logins from anywhere, as the
// image's default does) and reads its account's rows, and only those; once dropped on
// the primary it cannot log in on the replica either.
func TestRoleWorksOnAReplica(t *testing.T) {
	ctx := context.Background()
	e, _, replicaDSN := testenv.Replicated(t)
	mine, err := auth.CreateAccount(ctx, e.DB, "replica_mine")
	if err != nil {
		t.Fatal(err)
	}
	e.Seed(t, mine, "mine", "v", []testenv.Point{{TS: 1_700_000_000_000, Value: 1}, {TS: 1_700_000_001_000, Value: 2}})
	e.Seed(t, e.AdminToken, "theirs", "v", []testenv.Point{{TS: 1_700_000_000_000, Value: 3}})
	name, password, err := sqlrole.Create(ctx, e.DB.Pool, sqlrole.Spec{Account: "replica_mine", StatementTimeout: time.Minute, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := sqlrole.ConnString(replicaDSN, name, password)
	if err != nil {
		t.Fatal(err)
	}
	var labels string
	var n int
	eventually(t, func() bool { // until the replica has replayed the role and the rows
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return false
		}
		defer func() { _ = c.Close(ctx) }()
		err = c.QueryRow(ctx, `SELECT string_agg(DISTINCT device_label, ','), count(*) FROM sensor.values`).Scan(&labels, &n)
		return err == nil && n == 2
	})
	if labels != "mine" {
		t.Fatalf("on the replica the role reads devices %q, want its account's only", labels)
	}
	if err := sqlrole.Drop(ctx, e.DB.Pool, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_ = c.Close(ctx)
		}
		return err != nil
	})
}

// eventually polls ok for up to testenv.Patience.
func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testenv.Patience); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", testenv.Patience)
		}
	}
}
