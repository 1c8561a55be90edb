package values_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// sliceRows is a RowSource over rows of slot 0, numbered as lines from 2.
type sliceRows struct {
	rows []values.Row
	i    int
}

func (s *sliceRows) Next() bool { s.i++; return s.i <= len(s.rows) }
func (s *sliceRows) Err() error { return nil }
func (s *sliceRows) Row() values.StagedRow {
	return values.StagedRow{Line: int64(s.i + 1), Row: s.rows[s.i-1]}
}

// importRows stages rows for the seeded variable and writes them in one transaction, as
// an import does, and returns whether the minute tiles came from the tiler.
func importRows(t *testing.T, s testenv.Seeded, rows []values.Row) bool {
	t.Helper()
	ctx := context.Background()
	store := &values.Store{Pool: env.DB.Pool}
	var tiled bool
	err := pgx.BeginFunc(ctx, env.DB.Pool, func(tx pgx.Tx) error {
		st, err := store.Stage(ctx, tx, &sliceRows{rows: rows})
		if err != nil {
			return err
		}
		defer st.Close()
		_, err = st.Write(ctx, tx, []int64{s.VariableKey}, values.Targets{
			Devices:   []values.Ref{{ID: s.DeviceKey, Label: s.DeviceLabel}},
			Variables: map[int64]string{s.VariableKey: s.VariableLabel}})
		tiled = values.TiledBeside(st)
		return err
	})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return tiled
}

// TestImportTilesBesideTheUpsert: a history import large enough to be retiled over its
// span has its minute tiles built on a second connection while it upserts, from the
// staged rows and the stored values they do not replace (rows and a packed day), and
// every tier then matches the values: an import into an empty period, one over stored
// values (every other timestamp replaced, the rest new), one whose file repeats
// timestamps out of order (the last line wins), and one around a packed day it does
// not touch.
func TestImportTilesBesideTheUpsert(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC)
	t0 := day.UnixMilli()
	stored := make([]testenv.Point, 30_000) // every 2 s from t0 + 1 h
	for i := range stored {
		stored[i] = testenv.Point{TS: t0 + 3600_000 + int64(i)*2000, Value: float64(i%613) * 0.37}
	}
	s := env.Seed(t, env.NewAccount(t), "hist", "v", stored)
	store := &values.Store{Pool: env.DB.Pool}
	if n, err := store.PackDay(ctx, s.VariableKey, day); err != nil || n != len(stored) {
		t.Fatalf("packed %d (%v)", n, err)
	}
	check := func(what string, want int) {
		t.Helper()
		ms, err := store.CheckVariable(ctx, s.VariableKey, time.Time{})
		if err != nil || len(ms) != 0 {
			for _, m := range ms[:min(3, len(ms))] {
				t.Logf("%s %v: n %v, rolled %v", m.Table, m.Tile, deref(m.N), deref(m.Rolled))
			}
			t.Fatalf("%s: %d tiles differ from the values (%v)", what, len(ms), err)
		}
		var n int
		if err := env.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM "values" WHERE variable_id = $1)
			+ (SELECT count(*) FROM packed_values(ARRAY[$1::bigint], '-infinity', 'infinity'))`, s.VariableKey).Scan(&n); err != nil || n != want {
			t.Fatalf("%s: %d values stored (%v), want %d", what, n, err, want)
		}
	}

	// into an empty period: the day before
	var rows []values.Row
	for i := range 25_000 {
		rows = append(rows, values.Row{TS: t0 - 86400_000 + int64(i)*3000, Value: float64(i) / 7})
	}
	if !importRows(t, s, rows) {
		t.Fatal("empty period: the minute tiles did not come from the tiler")
	}
	check("empty period", 55_000)

	// over the packed day: each stored timestamp of the first 12,500 replaced, and a new
	// one a second after each, so stored values stay inside the tiles on both ends
	rows = rows[:0]
	for i := range 12_500 {
		ts := stored[5000+i].TS
		rows = append(rows, values.Row{TS: ts, Value: -float64(i)}, values.Row{TS: ts + 1000, Value: float64(i) * 1.5})
	}
	if !importRows(t, s, rows) {
		t.Fatal("over stored values: the minute tiles did not come from the tiler")
	}
	check("over stored values", 55_000+12_500)

	// a file out of order that repeats timestamps: the last line of each wins
	rows = rows[:0]
	for i := range 21_000 {
		rows = append(rows, values.Row{TS: stored[29_999-i].TS, Value: 1})
	}
	for i := range 21_000 {
		rows = append(rows, values.Row{TS: stored[29_999-i].TS, Value: float64(-i)})
	}
	if !importRows(t, s, rows) {
		t.Fatal("repeated timestamps: the minute tiles did not come from the tiler")
	}
	check("repeated timestamps", 55_000+12_500)
	// around a packed day the import leaves alone: its dots stay packed, without minute
	// tiles, while the days on both sides are tiled
	d2 := t0 + 2*86400_000
	rows = rows[:0]
	for i := range 100 {
		rows = append(rows, values.Row{TS: d2 + int64(i)*60_000, Value: float64(i)})
	}
	importRows(t, s, rows)
	if n, err := store.PackDay(ctx, s.VariableKey, time.UnixMilli(d2).UTC()); err != nil || n != 100 {
		t.Fatalf("packed %d (%v)", n, err)
	}
	rows = rows[:0]
	for i := range 10_500 {
		rows = append(rows, values.Row{TS: d2 - 86400_000 + int64(i)*5000, Value: float64(i)},
			values.Row{TS: d2 + 86400_000 + int64(i)*5000, Value: -float64(i)})
	}
	if !importRows(t, s, rows) {
		t.Fatal("around a packed day: the minute tiles did not come from the tiler")
	}
	check("around a packed day", 55_000+12_500+100+21_000)

	var bad int
	if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM "values" WHERE variable_id = $1 AND ts BETWEEN $2 AND $3 AND value = 1`,
		s.VariableKey, time.UnixMilli(stored[0].TS), time.UnixMilli(stored[len(stored)-1].TS)).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d values from a line a later one repeats (%v)", bad, err)
	}
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
