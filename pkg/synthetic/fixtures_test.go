package synthetic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// fixtures is testdata/fixtures.json, written by gen.py with pandas.
type fixtures struct {
	Points map[string][][2]float64 `json:"points"`
	Cases  []struct {
		Expr     string       `json:"expr"`
		Expected [][2]float64 `json:"expected"`
	} `json:"cases"`
}

func loadFixtures(t *testing.T) fixtures {
	t.Helper()
	raw, err := os.ReadFile("testdata/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx fixtures
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 60 {
		t.Fatalf("only %d cases", len(fx.Cases))
	}
	return fx
}

// withDevice is a client of a new account holding one device of that label.
func withDevice(t *testing.T, label string) *testenv.Client {
	t.Helper()
	c := env.Client(t).As(env.NewAccount(t))
	mustStatus(t, c.Post("/api/v2.0/devices/", map[string]any{"label": label}), 201)
	return c
}

func mustStatus(t *testing.T, r testenv.Response, status int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if status == 204 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return m
}

// storedValues reads a variable's values, oldest first.
func storedValues(t *testing.T, key int64) [][2]float64 {
	t.Helper()
	rows, err := env.DB.Pool.Query(context.Background(),
		`SELECT round(date_part('epoch', ts) * 1000)::bigint, value FROM (
			SELECT ts, value FROM "values" WHERE variable_id = $1
			UNION ALL SELECT ts, value FROM packed_values(ARRAY[$1::bigint], '-infinity', 'infinity')) x ORDER BY ts`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][2]float64
	for rows.Next() {
		var ts int64
		var v float64
		if err := rows.Scan(&ts, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]float64{float64(ts), v})
	}
	return out
}

// sameSeries compares timestamps exactly and values within 1e-9 relative.
func sameSeries(got, want [][2]float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i][0] != want[i][0] {
			return fmt.Errorf("value %d at %d, want at %d", i, int64(got[i][0]), int64(want[i][0]))
		}
		if d := math.Abs(got[i][1] - want[i][1]); d > 1e-9*math.Max(1, math.Abs(want[i][1])) {
			return fmt.Errorf("at %d: %v, want %v", int64(want[i][0]), got[i][1], want[i][1])
		}
	}
	return nil
}

func keyOf(t *testing.T, publicID string) int64 {
	t.Helper()
	var k int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT id FROM variables WHERE public_id = $1`, publicID).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

func postPoints(t *testing.T, c *testenv.Client, variable string, pts [][2]float64) {
	t.Helper()
	body := make([]map[string]any, len(pts))
	for i, p := range pts {
		body[i] = map[string]any{"timestamp": int64(p[0]), "value": p[1]}
	}
	if r := c.Post("/api/v1.6/devices/d/"+variable+"/values", body); r.Status != 201 {
		t.Fatalf("post values: %d %.300s", r.Status, r.Body)
	}
}

// quiesce waits until no to-do row is left (the live upkeep caught up).
func quiesce(t *testing.T, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		n, err := synthetic.Pending(context.Background(), env.DB.Pool)
		if err != nil {
			t.Fatal(err)
		}
		var busy int
		// a to-do taken by a worker is locked; count those too
		if err := env.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM synthetic_dirty`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if n == 0 && busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d to-do rows still pending after %v", busy, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPandasFixtures replays gen.py's cases: every function, windows in UTC,
// Asia/Kathmandu and Europe/Berlin across its DST change, two inputs with partly
// different timestamps, division by zero. Once as a backfill of stored values, once
// live: expressions first, then the inputs' values in shuffled batches (late data
// into closed windows, out of order).
func TestPandasFixtures(t *testing.T) {
	fx := loadFixtures(t)
	for _, mode := range []string{"backfill", "live"} {
		t.Run(mode, func(t *testing.T) {
			c := withDevice(t, "d")
			for _, v := range []string{"a", "b"} {
				mustStatus(t, c.Post("/api/v2.0/devices/~d/variables/", map[string]any{"label": v}), 201)
			}
			if mode == "backfill" {
				postPoints(t, c, "a", fx.Points["a"])
				postPoints(t, c, "b", fx.Points["b"])
			}
			keys := make([]int64, len(fx.Cases))
			for i, cs := range fx.Cases {
				v := mustStatus(t, c.Post("/api/v2.0/devices/~d/variables/",
					map[string]any{"label": fmt.Sprintf("s%d", i), "syntheticExpression": cs.Expr}), 201)
				keys[i] = keyOf(t, v["id"].(string))
			}
			if mode == "live" {
				// the settling recompute of each definition (3 s later) first: what
				// follows must be the live upkeep's work alone
				quiesce(t, 30*time.Second)
				rng := rand.New(rand.NewPCG(1, 2))
				// contiguous runs of values in shuffled order: each write's range is
				// narrow, and most land before values already written (late data
				// into closed windows)
				for _, v := range []string{"a", "b"} {
					pts := fx.Points[v]
					var runs [][][2]float64
					for len(pts) > 0 {
						n := min(len(pts), 1+rng.IntN(30))
						runs, pts = append(runs, pts[:n]), pts[n:]
					}
					rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
					for _, r := range runs {
						postPoints(t, c, v, r)
					}
				}
				quiesce(t, 60*time.Second)
			}
			for i, cs := range fx.Cases {
				if err := sameSeries(storedValues(t, keys[i]), cs.Expected); err != nil {
					t.Errorf("%s: %v", cs.Expr, err)
				}
			}
		})
	}
}
