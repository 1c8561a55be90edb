package values_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestReportCountsPointsAndBytes: the report counts the raw points written and the rows
// of each tier, and the bytes grow with the data (a report that read the wrong table
// or divided by the wrong count would fail one of these).
func TestReportCountsPointsAndBytes(t *testing.T) {
	ctx := context.Background()
	before, err := values.Measure(ctx, env.DB.Pool)
	if err != nil {
		t.Fatal(err)
	}
	// 3,000 points at 10 s: 500 minutes, 34 quarters, 1 day
	points := make([]testenv.Point, 3000)
	start := int64(1_767_225_600_000) // 2026-01-01T00:00:00Z
	for i := range points {
		points[i] = testenv.Point{TS: start + int64(i)*10_000, Value: float64(i % 97)}
	}
	env.Seed(t, env.NewAccount(t), "meter", "kwh", points)

	after, err := values.Measure(ctx, env.DB.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Points - before.Points; got != 3000 {
		t.Errorf("points: %d more, want 3000", got)
	}
	wantRows := map[string]int64{"values": 3000, "value_minutes": 500, "value_quarters": 34, "value_days": 1}
	for i, tb := range after.Tables {
		if got := tb.Rows - before.Tables[i].Rows; got != wantRows[tb.Name] {
			t.Errorf("%s: %d more rows, want %d", tb.Name, got, wantRows[tb.Name])
		}
		if tb.All <= before.Tables[i].All && tb.Name == "values" {
			t.Errorf("%s: %d bytes after the write, %d before", tb.Name, tb.All, before.Tables[i].All)
		}
		if tb.All < tb.Heap+tb.Index {
			t.Errorf("%s: total %d < heap %d + index %d", tb.Name, tb.All, tb.Heap, tb.Index)
		}
	}
	// a row of "values" is ≥ 40 bytes of heap (tuple header, key, ts, value) plus its index
	if pp := after.PerPoint(after.Tables[0].All); pp < 40 {
		t.Errorf("values: %.1f B/point, not plausible", pp)
	}
	var out bytes.Buffer
	if err := after.Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"value_minutes", "value_days", "total B/pt", "points"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
