package store_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sensordata/sensorapi/pkg/store"
	migrations "github.com/sensordata/sensorapi/sql"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestMigrationsConcurrent: instances starting together all succeed, and a second run
// applies nothing.
func TestMigrationsConcurrent(t *testing.T) {
	ctx := context.Background()
	dbs := make([]*store.DB, 4)
	for i := range dbs {
		db, err := store.Open(ctx, env.DSN, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		dbs[i] = db
	}
	// env's database is already migrated; reset it to empty to race a first migration
	// (the migrations' schemas besides public too; the roles are the cluster's and stay).
	if _, err := env.DB.ExecContext(ctx, `DROP SCHEMA sensor, sensor_admin, public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(dbs))
	applied := make([][]string, len(dbs))
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = store.Migrate(ctx, db)
		}()
	}
	wg.Wait()
	// env's sessions cached the dropped tables (TimescaleDB's hypertable cache answers
	// "could not open relation with OID" from them): the tests after this one get new ones
	env.DB.SetMaxIdleConns(0)
	env.DB.SetMaxIdleConns(2)
	env.DB.Pool.Reset()
	total := 0
	for i := range dbs {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		total += len(applied[i])
	}
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	// every migration file, whoever added it, is applied exactly once
	if want := len(ms.Sorted()); total != want {
		t.Fatalf("applied %d migrations in all, want each of %d exactly once: %v", total, want, applied)
	}
	again, err := store.Migrate(ctx, dbs[0])
	if err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, %v", again, err)
	}
	if err := store.Ready(ctx, dbs[0]); err != nil {
		t.Fatal(err)
	}
}

func TestValuesIsHypertableWithUniqueIndex(t *testing.T) {
	ctx := context.Background()
	var n int
	err := env.DB.NewRaw(`SELECT count(*) FROM timescaledb_information.hypertables WHERE hypertable_name = 'values'`).Scan(ctx, &n)
	if err != nil || n != 1 {
		t.Fatalf("hypertable: %d %v", n, err)
	}
	var def string
	err = env.DB.NewRaw(`SELECT indexdef FROM pg_indexes WHERE indexname = 'values_variable_ts_idx'`).Scan(ctx, &def)
	if err != nil || def != `CREATE UNIQUE INDEX values_variable_ts_idx ON public."values" USING btree (variable_id, ts DESC)` {
		t.Fatalf("index: %q %v", def, err)
	}
}

// TestMigrateRefusesNotUTF8: a database encoded SQL_ASCII is refused before anything
// is migrated, with the statement that creates one in UTF8.
func TestMigrateRefusesNotUTF8(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, env.SQLASCIIDatabase(t, "ascii_migrate"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	_, err = store.Migrate(ctx, db)
	if !errors.Is(err, store.ErrNotUTF8) || !strings.Contains(err.Error(), `database "ascii_migrate" is SQL_ASCII`) ||
		!strings.Contains(err.Error(), `CREATE DATABASE "ascii_migrate" ENCODING 'UTF8' TEMPLATE template0`) {
		t.Fatalf("migrate: %v", err)
	}
	var tables int
	if err := db.NewRaw(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(ctx, &tables); err != nil || tables != 0 {
		t.Fatalf("%d tables created (%v)", tables, err)
	}
}
