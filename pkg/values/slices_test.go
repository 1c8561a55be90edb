package values_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
)

// TestPackedDotsReadSlicesExactly: packed_dots unnests only the slice of a day's
// arrays that its residual bounds allow (sql/20261127300001_packed_slices.up.sql), and
// still returns exactly the dots with a timestamp in [first, last], contexts and
// created_at included, for days of every shape: regular, jittered, bursts at both ends
// with a near-empty middle (residuals of hours), uniform random, one dot, two dots,
// dots on the day's first and last millisecond. Bounds are drawn around the dots (on
// one, a microsecond or a millisecond either side), anywhere in or around the day,
// infinite, or reversed; every day is read again with its bounds cleared (a row
// packed before they existed: the whole day).
func TestPackedDotsReadSlicesExactly(t *testing.T) {
	ctx := context.Background()
	s := env.Seed(t, env.NewAccount(t), "slices", "v", nil)
	rng := rand.New(rand.NewPCG(2026, 1127))
	day0 := time.Date(1996, 3, 1, 0, 0, 0, 0, time.UTC)
	const dayMs = int64(86_400_000)
	var ts []int64 // ms since day0
	shapes := []func(base int64){
		// a minute apart, not 10 s: packed_values subscripts created_r per dot, which
		// costs the square of a day's dots (the readers of created_at use packed_rows,
		// sql/20261127300002_packed_created.up.sql); at 8,640 dots a day this test took 50 s
		func(base int64) { // regular, 1 min
			for i := range int64(1440) {
				ts = append(ts, base+i*60_000)
			}
		},
		func(base int64) { // 1 min, up to 100 ms late
			for i := range int64(1440) {
				ts = append(ts, base+i*60_000+rng.Int64N(101))
			}
		},
		func(base int64) { // bursts at both ends, three dots between
			for i := range int64(300) {
				ts = append(ts, base+i*200, base+dayMs-1-i*200)
			}
			ts = append(ts, base+dayMs/3, base+dayMs/2, base+dayMs/2+1)
		},
		func(base int64) { // 500 uniform random
			for range 500 {
				ts = append(ts, base+rng.Int64N(dayMs))
			}
		},
		func(base int64) { ts = append(ts, base+rng.Int64N(dayMs)) },                               // one dot
		func(base int64) { ts = append(ts, base+rng.Int64N(1000), base+dayMs-1-rng.Int64N(1000)) }, // two
		func(base int64) { // first and last millisecond, a minute at 1 s in the middle
			ts = append(ts, base, base+dayMs-1)
			for i := range int64(60) {
				ts = append(ts, base+43_200_000+i*1000)
			}
		},
	}
	for d, shape := range shapes {
		shape(int64(d) * dayMs)
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	at := func(ms int64) time.Time { return day0.Add(time.Duration(ms) * time.Millisecond) }
	tss, vals, contexts, created := make([]time.Time, len(ts)), make([]float64, len(ts)), make([]*string, len(ts)), make([]time.Time, len(ts))
	for i, x := range ts {
		tss[i], vals[i] = at(x), rng.NormFloat64()
		created[i] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e12)) * time.Microsecond)
		if rng.IntN(50) == 0 {
			c := fmt.Sprintf(`{"k": %d}`, i)
			contexts[i] = &c
		}
	}
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value, context, created_at)
		SELECT $1, t, v, c::jsonb, ca FROM unnest($2::timestamptz[], $3::float8[], $4::text[], $5::timestamptz[]) AS u(t, v, c, ca)`,
		s.VariableKey, tss, vals, contexts, created); err != nil {
		t.Fatal(err)
	}
	want := bothLayouts(t, s.VariableKey) // as rows: the truth
	st := &values.Store{Pool: env.DB.Pool}
	for d := range shapes {
		if n, err := st.PackDay(ctx, s.VariableKey, day0.Add(time.Duration(d)*day)); err != nil || n == 0 {
			t.Fatalf("pack day %d: %d dots, %v", d, n, err)
		}
	}
	if n := count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1 AND ts_rmin IS NOT NULL AND ts_rmax IS NOT NULL`,
		s.VariableKey); n != len(shapes) {
		t.Fatalf("%d packed days with residual bounds, want %d", n, len(shapes))
	}

	// both readers: packed_values (created_at by subscript) and packed_rows (created_r
	// unnested in the slice)
	read := func(fn string, first, last time.Time) []stored {
		rows, err := env.DB.Pool.Query(ctx, `SELECT ts, value, coalesce(context::text, ''), created_at
			FROM `+fn+`(ARRAY[$1::bigint], $2, $3) ORDER BY ts`, s.VariableKey, first, last)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []stored
		for rows.Next() {
			var x stored
			if err := rows.Scan(&x.TS, &x.Value, &x.Context, &x.Created); err != nil {
				t.Fatal(err)
			}
			out = append(out, x)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	inf, negInf := time.Date(294000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC)
	bound := func() time.Time {
		switch rng.IntN(8) {
		case 0: // anywhere in or around the days
			return at(rng.Int64N(int64(len(shapes)+2)*dayMs) - dayMs).Add(time.Duration(rng.IntN(1000)) * time.Microsecond)
		case 1:
			return []time.Time{inf, negInf, day0, at(int64(len(shapes)) * dayMs)}[rng.IntN(4)]
		default: // on a dot, or just beside it
			return want[rng.IntN(len(want))].TS.Add([]time.Duration{0, time.Microsecond, -time.Microsecond,
				time.Millisecond, -time.Millisecond, 10 * time.Second}[rng.IntN(6)])
		}
	}
	check := func(what string) {
		for range 120 { // each pair of bound kinds ~2 times (a wide read returns all 4k dots)
			first, last := bound(), bound()
			if rng.IntN(8) > 0 && first.After(last) {
				first, last = last, first
			}
			var exp []stored
			for _, x := range want {
				if !x.TS.Before(first) && !x.TS.After(last) {
					exp = append(exp, x)
				}
			}
			for _, fn := range []string{"packed_values", "packed_rows"} {
				got := read(fn, first, last)
				if len(got) != len(exp) {
					t.Fatalf("%s %s [%s, %s]: %d dots, want %d", what, fn, first.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano), len(got), len(exp))
				}
				for i := range got {
					if g, w := got[i], exp[i]; !g.TS.Equal(w.TS) || math.Float64bits(g.Value) != math.Float64bits(w.Value) ||
						g.Context != w.Context || !g.Created.Equal(w.Created) {
						t.Fatalf("%s %s [%s, %s] dot %d: %+v, want %+v", what, fn, first.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano), i, g, w)
					}
				}
			}
		}
	}
	check("with residual bounds")
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE values_packed SET ts_rmin = NULL, ts_rmax = NULL WHERE variable_id = $1`, s.VariableKey); err != nil {
		t.Fatal(err)
	}
	check("without residual bounds")
}
