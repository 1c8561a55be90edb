package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/sensordata/sensorapi/pkg/values"
)

// Point is one stored value for Seed.
type Point struct {
	TS    int64 // milliseconds since the epoch
	Value float64
}

// Seeded names what Seed created.
type Seeded struct {
	AccountID                  int64
	DeviceID, VariableID       string // public ids
	DeviceLabel, VariableLabel string
	DeviceKey, VariableKey     int64 // internal keys
}

// Seed writes a device, one variable and its values straight into the tables, for
// tests of the read side that must not depend on the ingestion routes. The account is
// the one holding token.
func (e *Env) Seed(t testing.TB, token, device, variable string, points []Point) Seeded {
	t.Helper()
	ctx := context.Background()
	s := Seeded{DeviceLabel: device, VariableLabel: variable}
	err := e.DB.NewRaw(`SELECT a.id FROM accounts a JOIN tokens t ON t.account_id = a.id
		WHERE t.hash = sha256(convert_to(?, 'UTF8'))`, token).Scan(ctx, &s.AccountID)
	if err != nil {
		t.Fatalf("seed: account of token: %v", err)
	}
	err = e.DB.NewRaw(`INSERT INTO devices (account_id, label, name) VALUES (?, ?, ?)
		ON CONFLICT (account_id, label) DO UPDATE SET name = EXCLUDED.name
		RETURNING id, public_id`, s.AccountID, device, device).Scan(ctx, &s.DeviceKey, &s.DeviceID)
	if err != nil {
		t.Fatalf("seed: device: %v", err)
	}
	err = e.DB.NewRaw(`INSERT INTO variables (account_id, device_id, label, name) VALUES (?, ?, ?, ?)
		RETURNING id, public_id`, s.AccountID, s.DeviceKey, variable, variable).Scan(ctx, &s.VariableKey, &s.VariableID)
	if err != nil {
		t.Fatalf("seed: variable: %v", err)
	}
	if len(points) == 0 {
		return s
	}
	ts := make([]time.Time, len(points))
	vs := make([]float64, len(points))
	for i, p := range points {
		ts[i], vs[i] = time.UnixMilli(p.TS).UTC(), p.Value
	}
	_, err = e.DB.NewRaw(`INSERT INTO "values" (variable_id, ts, value)
		SELECT ?, t, v FROM unnest(?::timestamptz[], ?::float8[]) AS u(t, v)
		ON CONFLICT (variable_id, ts) DO UPDATE SET value = EXCLUDED.value`,
		s.VariableKey, pgdialect.Array(ts), pgdialect.Array(vs)).Exec(ctx)
	if err != nil {
		t.Fatalf("seed: values: %v", err)
	}
	// the invariant the write path keeps: value_minutes summarizes "values"
	if err := (&values.Store{Pool: e.DB.Pool}).RebuildVariable(ctx, s.VariableKey, time.Time{}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return s
}
