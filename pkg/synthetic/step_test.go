package synthetic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sensordata/sensorapi/pkg/synthetic"
)

// TestStepManyVariables gives one step the to-do of several synthetic variables: four
// that compute and one whose values cannot be stored (a test trigger refuses them). The step's batch fails with the bad
// one; each variable is then done again alone: the four commit (their to-do goes, their
// values equal the recomputation), the bad one's to-do stays, postponed (attempts 1, due
// later), counted as failed. Then a step of the four alone commits as one batch.
func TestStepManyVariables(t *testing.T) {
	ctx := context.Background()
	c := withDevice(t, "m")
	in := map[string]int64{}
	for _, v := range []string{"x", "y"} {
		r := mustStatus(t, c.Post("/api/v2.0/devices/~m/variables/", map[string]any{"label": v}), 201)
		in[v] = keyOf(t, r["id"].(string))
	}
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	defs := []struct{ label, expr string }{
		{"a", "{{m.x}} + 1"},
		{"b", "{{m.x}} * 2"},
		{"c", `mean({{m.x}}, "1H")`},
		{"d", "diff({{m.x}})"},
		{"bad", "{{m.y}} * 2"}, // its values are refused by a trigger (below)
	}
	var keys []int64
	var bad int64
	var badID string
	for _, d := range defs {
		r := mustStatus(t, c.Post("/api/v2.0/devices/~m/variables/", map[string]any{"label": d.label, "syntheticExpression": d.expr}), 201)
		k := keyOf(t, r["id"].(string))
		if d.label == "bad" {
			bad, badID = k, r["id"].(string)
		} else {
			keys = append(keys, k)
		}
	}
	// every value of the bad variable fails to store, as an expression that keeps failing
	// would; it would fail every retry of the instances' workers: gone at the end
	if _, err := env.DB.Pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION refuse_%[1]d() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.variable_id = %[1]d THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_%[1]d BEFORE INSERT ON "values" FOR EACH ROW EXECUTE FUNCTION refuse_%[1]d()`, bad)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Delete("/api/v2.0/variables/" + badID)
		_, _ = env.DB.Pool.Exec(ctx, `DELETE FROM synthetic_dirty WHERE variable_id = $1`, bad)
		_, _ = env.DB.Pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER refuse_%[1]d ON "values"; DROP FUNCTION refuse_%[1]d()`, bad))
	})
	quiesce(t, 20*time.Second) // the definitions' settling recomputes
	// inputs written behind the upkeep's back (no to-do), then to-do rows the instances'
	// workers leave alone (due in an hour): only the test's steps take them
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value)
		SELECT $1::bigint, to_timestamp(($3::bigint + i * 600000) / 1000.0), i FROM generate_series(0, 11) i
		UNION ALL SELECT $2::bigint, to_timestamp($3::bigint / 1000.0), 1e10`, in["x"], in["y"], base); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	err := env.DB.Pool.QueryRow(ctx, `WITH ins AS (INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts, not_before)
		SELECT k, 0, $2::bigint, now() + interval '1 hour' FROM unnest($1::bigint[]) k RETURNING id)
		SELECT array_agg(id) FROM ins`, append(append([]int64{}, keys...), bad), synthetic.MaxTimestamp).Scan(&ids)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	u := synthetic.NewUpkeep(env.DB.Pool, env.Log, reg)
	did, err := u.StepRows(ctx, ids)
	if !did || err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("step: did %v, err %v; want the bad variable's refusal", did, err)
	}
	var left []int64
	var attempts int
	var later bool
	if err := env.DB.Pool.QueryRow(ctx, `SELECT array_agg(variable_id), max(attempts), bool_and(not_before > now())
		FROM synthetic_dirty WHERE id = ANY($1)`, ids).Scan(&left, &attempts, &later); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != bad || attempts != 1 || !later {
		t.Fatalf("to-do left %v (attempts %d, postponed %v), want only the bad variable's %d, postponed once", left, attempts, later, bad)
	}
	ok, failed := counts(t, reg)
	if ok != 4 || failed != 1 {
		t.Fatalf("recomputes counted ok %v failed %v, want 4 and 1", ok, failed)
	}
	checkStored(t, keys, 12)
	if n := len(storedValues(t, bad)); n != 0 {
		t.Fatalf("the bad variable holds %d values", n)
	}

	// the four again, in one step: a later value and a late one, one batch
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value) VALUES
		($1, to_timestamp(($2::bigint + 7200000) / 1000.0), 99), ($1, to_timestamp(($2::bigint + 1) / 1000.0), -5)`, in["x"], base); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.Pool.QueryRow(ctx, `WITH ins AS (INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts, not_before)
		SELECT k, r.f, r.t, now() + interval '1 hour' FROM unnest($1::bigint[]) k,
			(VALUES ($2::bigint + 1, $2::bigint + 1), ($2::bigint + 7200000, $2::bigint + 7200000)) r(f, t) RETURNING id)
		SELECT array_agg(id) FROM ins`, keys, base).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	// the variables' own Affected ranges are the upkeep's business (Mark): here, the
	// whole history of each, so that the check holds whatever the expression
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE synthetic_dirty SET from_ts = 0, to_ts = $2 WHERE id = ANY($1)`, ids, synthetic.MaxTimestamp); err != nil {
		t.Fatal(err)
	}
	if did, err := u.StepRows(ctx, ids); !did || err != nil {
		t.Fatalf("step: did %v, err %v", did, err)
	}
	if ok, failed := counts(t, reg); ok != 8 || failed != 1 {
		t.Fatalf("recomputes counted ok %v failed %v, want 8 and 1", ok, failed)
	}
	var n int
	if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM synthetic_dirty WHERE id = ANY($1)`, ids).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d to-do rows left (%v)", n, err)
	}
	checkStored(t, keys, 14)
}

// counts reads the recompute counter of a registry.
func counts(t *testing.T, reg *prometheus.Registry) (ok, failed float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sensorapi_synthetic_recomputes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case "ok":
				ok = m.GetCounter().GetValue()
			case "failed":
				failed = m.GetCounter().GetValue()
			}
		}
	}
	return ok, failed
}

// checkStored: each variable equals its recomputation, and the first (x + 1) holds
// one value per input value.
func checkStored(t *testing.T, keys []int64, inputs int) {
	t.Helper()
	matchesRecomputation(t, keys)
	if n := len(storedValues(t, keys[0])); n != inputs {
		t.Fatalf("a holds %d values, want %d", n, inputs)
	}
}

// matchesRecomputation fails the test when a variable's stored values differ from
// synthetic.Check's recomputation (listing the first differences).
func matchesRecomputation(t *testing.T, keys []int64) {
	t.Helper()
	checked, err := synthetic.Check(context.Background(), env.DB.Pool, keys, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(checked) != len(keys) {
		t.Fatalf("checked %d variables, want %d", len(checked), len(keys))
	}
	for _, ch := range checked {
		for _, d := range ch.Differences {
			t.Errorf("%s at %s: stored %v, computed %v", ch.Name, time.UnixMilli(d.TS).UTC(), deref(d.Stored), deref(d.Computed))
		}
	}
}
