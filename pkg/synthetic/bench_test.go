package synthetic_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/pkg/values"
)

// TestBackfillYear measures the backfill of one synthetic variable over a year of
// values at 10 s (3.15 M values), and E8 (1H mean over the year) over it and over its
// raw input. It runs only with SYNTHETIC_BENCH=1 (a minute of a quiet machine):
//
//	SYNTHETIC_BENCH=1 go test -count=1 -run BackfillYear -v ./pkg/synthetic
func TestBackfillYear(t *testing.T) {
	if os.Getenv("SYNTHETIC_BENCH") == "" {
		t.Skip("SYNTHETIC_BENCH=1 runs it")
	}
	ctx := context.Background()
	c := withDevice(t, "bench")
	raw := mustStatus(t, c.Post("/api/v2.0/devices/~bench/variables/", map[string]any{"label": "t"}), 201)
	f := mustStatus(t, c.Post("/api/v2.0/devices/~bench/variables/", map[string]any{"label": "f"}), 201)
	rawKey, fKey := keyOf(t, raw["id"].(string)), keyOf(t, f["id"].(string))
	start := time.Now()
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value)
		SELECT $1, ts, 20 + 10 * sin(extract(epoch FROM ts) / 86400)
		FROM generate_series('2025-01-01'::timestamptz, '2025-12-31 23:59:50', interval '10 seconds') ts`, rawKey); err != nil {
		t.Fatal(err)
	}
	var account int64
	_ = env.DB.Pool.QueryRow(ctx, `SELECT account_id FROM variables WHERE id = $1`, rawKey).Scan(&account)
	t.Logf("seeded 3.15 M raw values in %v", time.Since(start))
	start = time.Now()
	if err := (&values.Store{Pool: env.DB.Pool}).RebuildVariable(ctx, rawKey, time.Time{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("raw tiers rebuilt in %v", time.Since(start))
	for _, expr := range []string{"({{bench.t}} * 9/5) + 32", `mean({{bench.t}}, "1H")`} {
		start = time.Now()
		err := pgx.BeginFunc(ctx, env.DB.Pool, func(tx pgx.Tx) error {
			return synthetic.Define(ctx, synthetic.PgxTx(tx), account, fKey, expr)
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		_ = env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM "values" WHERE variable_id = $1`, fKey).Scan(&n)
		t.Logf("backfill of %s: %d values in %v", expr, n, time.Since(start))
	}
	// E8 over the synthetic variable (its values are now the hourly means) and the raw one
	if err := pgx.BeginFunc(ctx, env.DB.Pool, func(tx pgx.Tx) error {
		return synthetic.Define(ctx, synthetic.PgxTx(tx), account, fKey, "({{bench.t}} * 9/5) + 32")
	}); err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"raw": raw["id"].(string), "synthetic": f["id"].(string)} {
		body := map[string]any{"variables": []string{id}, "aggregation": "mean", "period": "1H",
			"start": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), "end": time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli()}
		var best time.Duration
		for i := range 5 {
			s := time.Now()
			mustStatus(t, c.Post("/api/v1.6/data/stats/resample/", body), 200)
			if d := time.Since(s); i == 0 || d < best {
				best = d
			}
		}
		t.Logf("E8 1H mean over the year, %s: best of 5 %v", name, best)
	}
}
