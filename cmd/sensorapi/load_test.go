package main_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestLoadWritesThroughFollowers: `sensorapi load` without --url writes as `serve`
// does (issue 46). Its values reach the synthetic variable reading them and the events
// on both, and it exits only once these have been recomputed and evaluated, with the
// deliveries queued: no other instance runs meanwhile. A write to a synthetic variable
// is refused, naming it, and writes nothing.
func TestLoadWritesThroughFollowers(t *testing.T) {
	bin := buildBinary(t)
	t.Run("dependents", func(t *testing.T) {
		acct, c, halt := loadAccount(t)
		mustCreate(t, c, "/api/v2.0/devices/", map[string]any{"label": "device-0"})
		mustCreate(t, c, "/api/v2.0/devices/~device-0/variables/", map[string]any{"label": "var-0"})
		mustCreate(t, c, "/api/v2.0/devices/~device-0/variables/", map[string]any{"label": "double",
			"syntheticExpression": "{{device-0.var-0}} * 2"})
		for _, v := range []string{"var-0", "double"} { // any value triggers
			mustCreate(t, c, "/api/v2.0/events/", map[string]any{"label": "on-" + v, "condition": map[string]any{
				"variable": "device-0." + v, "operator": ">", "value": -1e12},
				"actions": []any{map[string]any{"type": "set_variable", "variable": "device-0.alarm", "value": "1"}}})
		}
		halt() // from here on only load works on this database

		// 2500-dot messages go alone, the 500 left over through the queue
		out, err := runLoadCmd(bin, acct, "--points", "3000", "--batch", "2500", "--start", "2024-01-01T00:00:00Z")
		if err != nil {
			t.Fatalf("load: %v\n%s", err, out)
		}
		in, double := valueStats(t, acct, "var-0"), valueStats(t, acct, "double")
		if in.n != 3000 || double.n != in.n || math.Abs(double.sum-2*in.sum) > 1e-6*math.Abs(in.sum)+1e-9 {
			t.Fatalf("input %+v, synthetic %+v: want the synthetic variable recomputed over every loaded value", in, double)
		}
		for _, v := range []string{"var-0", "double"} {
			if state, deliveries := eventStats(t, acct, "on-"+v); state != "triggered" || deliveries != 1 {
				t.Errorf("event on %s: %s with %d deliveries queued; want triggered with 1", v, state, deliveries)
			}
		}
	})
	t.Run("synthetic refused", func(t *testing.T) {
		acct, c, halt := loadAccount(t)
		mustCreate(t, c, "/api/v2.0/devices/", map[string]any{"label": "device-0"})
		mustCreate(t, c, "/api/v2.0/devices/~device-0/variables/", map[string]any{"label": "raw"})
		mustCreate(t, c, "/api/v2.0/devices/~device-0/variables/", map[string]any{"label": "var-0",
			"syntheticExpression": "{{device-0.raw}} + 1"})
		halt()
		out, err := runLoadCmd(bin, acct, "--points", "50", "--start", "2024-01-01T00:00:00Z")
		if err == nil || !strings.Contains(string(out), "var-0") ||
			!strings.Contains(string(out), "The values of a synthetic variable are computed from its expression: they cannot be written.") {
			t.Fatalf("load to a synthetic variable: %v\n%s", err, out)
		}
		if s := valueStats(t, acct, "var-0"); s.n != 0 {
			t.Fatalf("%d values written to the synthetic variable", s.n)
		}
	})
}

// loadAccount makes an account of the test's own (load names it, --account) and an
// instance to set it up through, which the test stops before it loads.
func loadAccount(t *testing.T) (string, *testenv.Client, func()) {
	t.Helper()
	name := fmt.Sprintf("load_%d", time.Now().UnixNano())
	tok, err := auth.CreateAccount(context.Background(), env.DB, name)
	if err != nil {
		t.Fatal(err)
	}
	c, halt := env.ServeStoppable(t, env.DB, env.Config())
	return name, c.As(tok), halt
}

func mustCreate(t *testing.T, c *testenv.Client, path string, body map[string]any) {
	t.Helper()
	if r := c.Post(path, body); r.Status != 201 {
		t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
}

// runLoadCmd runs `sensorapi load` into the account, straight to the test database.
func runLoadCmd(bin, acct string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, append([]string{"load", "--account", acct}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
	return cmd.CombinedOutput()
}

type stats struct {
	n   int
	sum float64
}

// valueStats counts and sums the values of the account's variable on device-0.
func valueStats(t *testing.T, acct, variable string) stats {
	t.Helper()
	var s stats
	err := env.DB.NewRaw(`SELECT count(*), coalesce(sum(x.value), 0) FROM "values" x
		JOIN variables v ON v.id = x.variable_id JOIN devices d ON d.id = v.device_id
		JOIN accounts a ON a.id = d.account_id
		WHERE a.name = ? AND d.label = 'device-0' AND v.label = ?`, acct, variable).Scan(context.Background(), &s.n, &s.sum)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventStats reads the state of the account's event and counts its deliveries.
func eventStats(t *testing.T, acct, label string) (state string, deliveries int) {
	t.Helper()
	err := env.DB.NewRaw(`SELECT s.state, (SELECT count(*) FROM event_deliveries WHERE event_id = e.id)
		FROM events e JOIN event_states s ON s.event_id = e.id JOIN accounts a ON a.id = e.account_id
		WHERE a.name = ? AND e.label = ?`, acct, label).Scan(context.Background(), &state, &deliveries)
	if err != nil {
		t.Fatal(err)
	}
	return state, deliveries
}
