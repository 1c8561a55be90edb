package values_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestCatchUpIsolatesAFailingVariable: a variable whose tiles cannot be built (a test
// trigger refuses its minute tiles) keeps its own mark behind, CatchUp says so, and every
// other variable's mark moves on.
func TestCatchUpIsolatesAFailingVariable(t *testing.T) {
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	st := &values.Store{Pool: env.DB.Pool}
	soon := time.Now().Add(time.Hour).Truncate(time.Minute).UnixMilli()
	for _, d := range []struct {
		path string
		body []any
	}{
		{"/api/v1.6/devices/huge/h/values", []any{map[string]any{"value": 1, "timestamp": soon}, map[string]any{"value": 2, "timestamp": soon + 1000}}},
		{"/api/v1.6/devices/fine/f/values", []any{map[string]any{"value": 1, "timestamp": soon}}},
	} {
		if r := c.Post(d.path, d.body); r.Status != 201 {
			t.Fatalf("post %s: %d %s", d.path, r.Status, r.Body)
		}
	}
	var failing int64
	if err := env.DB.Pool.QueryRow(ctx, `SELECT id FROM variables WHERE public_id = $1`, c.VariableID("huge", "h")).Scan(&failing); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION refuse_%[1]d() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.variable_id = %[1]d THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_%[1]d BEFORE INSERT ON value_minutes FOR EACH ROW EXECUTE FUNCTION refuse_%[1]d()`, failing)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.DB.Pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER IF EXISTS refuse_%[1]d ON value_minutes; DROP FUNCTION IF EXISTS refuse_%[1]d()`, failing))
	})
	mark := func(device, variable string) time.Time {
		t.Helper()
		var m time.Time
		if err := env.DB.Pool.QueryRow(ctx, `SELECT rollups_until FROM variables WHERE public_id = $1`,
			c.VariableID(device, variable)).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// CatchUp skips a variable another run holds (every instance's CatchUpLoop takes
	// both once a minute has passed since their marks): until the next call
	until := time.UnixMilli(soon + 2*3600_000).UTC()
	refused := false
	testenv.Eventually(t, "CatchUp returns the refusal and the other variable's mark moves on", func() bool {
		switch _, err := st.CatchUp(ctx, until); {
		case err != nil && strings.Contains(err.Error(), "refused by the test"):
			refused = true
		case err != nil:
			t.Fatalf("CatchUp over a variable whose tiles are refused: %v, want its error", err)
		}
		return refused && mark("fine", "f").Equal(until)
	})
	if m := mark("huge", "h"); m.UnixMilli() > soon { // its refused minute tile starts at soon
		t.Fatalf("the failing variable's mark moved to %s, past its refused tile", m)
	}
	if r := c.Delete("/api/v2.0/devices/~huge"); r.Status != 204 {
		t.Fatalf("delete device: %d %s", r.Status, r.Body)
	}
	if _, err := st.CatchUp(ctx, until); err != nil {
		t.Fatalf("CatchUp without the failing variable: %v", err)
	}
}
