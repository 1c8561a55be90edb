package synthetic_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestPropertyTwoInstances drives a DAG of four synthetic variables over two raw
// inputs with seeded random sequences of writes (new values, overwrites, late data
// into closed windows), range deletes and expression changes, sent through two
// instances of the service on one database, several at once. After each quiescence
// every synthetic variable's stored values must equal the recomputation from its
// inputs (synthetic.Check: timestamps exactly, values within 1e-9). Every other round
// the packer runs beside the writers (issue 32): inputs and synthetic values move into
// packed days and back as writes reach them.
func TestPropertyTwoInstances(t *testing.T) {
	tok := env.NewAccount(t)
	c1, c2 := env.Client(t).As(tok), env.Instance(t).As(tok)
	mustStatus(t, c1.Post("/api/v2.0/devices/", map[string]any{"label": "p"}), 201)
	for _, v := range []string{"x", "y"} {
		mustStatus(t, c1.Post("/api/v2.0/devices/~p/variables/", map[string]any{"label": v}), 201)
	}
	defs := []struct{ label, expr string }{
		{"s1", "{{p.x}} * 2 + {{p.y}}"},
		{"s2", `mean({{p.s1}}, "1H", "Europe/Berlin")`},
		{"s3", "cumsum({{p.y}}) - diff({{p.s1}})"},
		{"s4", `sum({{p.s2}} * {{p.x}}, "1D", "Asia/Kathmandu") + shift({{p.x}}, 2)`},
	}
	alternatives := map[string][]string{
		"s2": {`mean({{p.s1}}, "1H", "Europe/Berlin")`, `max({{p.s1}}, "2H", "Europe/Berlin")`, `count({{p.s1}}, "30T")`, `mean({{p.s1}}, "1H")`},
		"s3": {"cumsum({{p.y}}) - diff({{p.s1}})", "where({{p.x}} > 5, {{p.s1}} / {{p.y}}, -{{p.x}})"},
	}
	ids := map[string]string{}
	var keys []int64
	for _, d := range defs {
		v := mustStatus(t, c1.Post("/api/v2.0/devices/~p/variables/", map[string]any{"label": d.label, "syntheticExpression": d.expr}), 201)
		ids[d.label] = v["id"].(string)
		keys = append(keys, keyOf(t, ids[d.label]))
	}
	xid, yid := func() (string, string) {
		l := mustStatus(t, c1.Get("/api/v2.0/devices/~p/variables/~x"), 200)
		m := mustStatus(t, c1.Get("/api/v2.0/devices/~p/variables/~y"), 200)
		return l["id"].(string), m["id"].(string)
	}()
	inputID := map[string]string{"x": xid, "y": yid}

	// timestamps on a 15-minute grid over four days around Berlin's change to summer
	// time, so that inputs and hourly labels meet
	base := time.Date(2026, 3, 27, 20, 0, 0, 0, time.UTC).UnixMilli()
	const slots = 4 * 24 * 4
	rng := rand.New(rand.NewPCG(20261126, 7))
	ctx := context.Background()
	op := func(c *testenv.Client, r *rand.Rand) string {
		switch k := r.IntN(10); {
		case k < 6: // a batch of values: new, overwrites, late data
			v := []string{"x", "y"}[r.IntN(2)]
			n := 1 + r.IntN(40)
			body := make([]map[string]any, n)
			for i := range body {
				body[i] = map[string]any{"timestamp": base + int64(r.IntN(slots))*900_000, "value": float64(r.IntN(2000)-500) / 10}
			}
			if res := c.Post("/api/v1.6/devices/p/"+v+"/values", body); res.Status != 201 {
				return fmt.Sprintf("write %s: %d %s", v, res.Status, res.Body)
			}
		case k < 8: // a range delete of an input
			v := []string{"x", "y"}[r.IntN(2)]
			from := base + int64(r.IntN(slots))*900_000
			to := from + int64(r.IntN(24))*900_000
			if res := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", inputID[v], from, to)); res.Status != 204 {
				return fmt.Sprintf("delete %s: %d %s", v, res.Status, res.Body)
			}
		default: // an expression change
			label := []string{"s2", "s3"}[r.IntN(2)]
			alts := alternatives[label]
			expr := alts[r.IntN(len(alts))]
			if res := c.Patch("/api/v2.0/variables/"+ids[label], map[string]any{"syntheticExpression": expr}); res.Status != 200 {
				return fmt.Sprintf("patch %s: %d %s", label, res.Status, res.Body)
			}
		}
		return ""
	}
	for round := 0; round < 12; round++ {
		// two writers at once, one per instance, each a few operations
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for w, c := range []*testenv.Client{c1, c2} {
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(w)))
				for range 4 {
					if e := op(c, r); e != "" {
						errs <- e
					}
				}
			}()
		}
		if round%2 == 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := values.Packer{Store: &values.Store{Pool: env.DB.Pool}, After: 2 * 24 * time.Hour, Log: env.Log}
				if _, err := p.Run(ctx); err != nil {
					errs <- "pack: " + err.Error()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		quiesce(t, 60*time.Second)
		checked, err := synthetic.Check(ctx, env.DB.Pool, keys, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checked {
			if len(c.Differences) > 0 {
				d := c.Differences[0]
				t.Fatalf("round %d: %s differs from its recomputation at %d timestamps, first %d: stored %v computed %v",
					round, c.Name, len(c.Differences), d.TS, deref(d.Stored), deref(d.Computed))
			}
		}
		if len(checked) != len(keys) {
			t.Fatalf("checked %d variables", len(checked))
		}
	}
	// the values are not trivially empty, and some are packed
	var packed int
	if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM values_packed WHERE variable_id = ANY($1)`, keys).Scan(&packed); err != nil || packed == 0 {
		t.Fatalf("%d packed days of synthetic variables (%v): packing was not exercised", packed, err)
	}
	for _, k := range keys {
		if n := len(storedValues(t, k)); n == 0 {
			t.Fatalf("variable %d holds no value", k)
		}
	}
}

func deref(x *float64) any {
	if x == nil {
		return "none"
	}
	return *x
}
