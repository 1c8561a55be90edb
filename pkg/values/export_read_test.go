package values_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
)

// TestExportReadsBothLayoutsNewestFirst: an export yields exactly the dots of its range,
// newest first, bit for bit (value, timestamp, context, created_at to the ms), whether
// they are rows or packed days, with range bounds inside packed days, inside rows and on
// day boundaries, and with stretches of rows longer than a page (pages of 100 here).
func TestExportReadsBothLayoutsNewestFirst(t *testing.T) {
	defer values.SetExportPage(100)()
	c := env.Client(t).As(env.NewAccount(t))
	old := time.Now().UTC().Add(-40 * day).Truncate(day)
	rng := rand.New(rand.NewPCG(43, 1))
	var dots []map[string]any
	for i := range 5 * 288 { // five days at 5 min, jittered, some with a context
		ts := old.Add(time.Duration(i)*5*time.Minute + time.Duration(rng.IntN(60_000))*time.Millisecond)
		d := map[string]any{"timestamp": ts.UnixMilli(), "value": rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))}
		if i%37 == 0 {
			d["context"] = map[string]any{"i": i, "note": "a, \"quoted\"\nline"}
		}
		dots = append(dots, d)
	}
	for i := range 150 { // and recent rows
		dots = append(dots, map[string]any{"timestamp": time.Now().Add(-time.Duration(i) * time.Minute).UnixMilli(), "value": float64(i)})
	}
	post(t, c, "/api/v1.6/devices/exporter/t/values", dots)
	key := variableKey(t, "exporter", "t")
	st := &values.Store{Pool: env.DB.Pool}
	for _, d := range []int{1, 3} { // rows, packed, rows, packed, rows, recent rows
		if n, err := st.PackDay(context.Background(), key, old.Add(time.Duration(d)*day)); err != nil || n == 0 {
			t.Fatalf("pack day %d: %d %v", d, n, err)
		}
	}
	all := bothLayouts(t, key)
	if len(all) != len(dots) || count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1`, key) != 2 {
		t.Fatalf("%d dots stored of %d, or not two packed days", len(all), len(dots))
	}
	ms := func(i int) int64 { return all[i].TS.UnixMilli() }
	ranges := []values.Range{{}, {Start: ptr(old.Add(day).UnixMilli()), End: ptr(old.Add(4*day).UnixMilli() - 1)}}
	for range 30 {
		i, j := rng.IntN(len(all)), rng.IntN(len(all))
		lo, hi := min(ms(i), ms(j))+int64(rng.IntN(3)-1), max(ms(i), ms(j))+int64(rng.IntN(3)-1)
		ranges = append(ranges, values.Range{Start: &lo, End: &hi})
	}
	for _, r := range ranges {
		checkExport(t, st, key, r, all)
	}
}

// checkExport compares an export of r with the stored dots in r, newest first.
func checkExport(t *testing.T, st *values.Store, key int64, r values.Range, all []stored) {
	t.Helper()
	lo, hi := r.Bounds()
	var want []stored
	for i := len(all) - 1; i >= 0; i-- {
		if !all[i].TS.Before(lo) && !all[i].TS.After(hi) {
			want = append(want, all[i])
		}
	}
	n := 0
	err := st.Export(context.Background(), key, r, func(d values.ExportedDot) error {
		if n >= len(want) {
			return fmt.Errorf("more than the %d dots stored in the range", len(want))
		}
		w := want[n]
		if d.Timestamp != w.TS.UnixMilli() || math.Float64bits(d.Value) != math.Float64bits(w.Value) ||
			string(d.Context) != w.Context || d.CreatedAt != w.Created.UnixMilli() {
			return fmt.Errorf("dot %d: %d %v %s %d, stored %d %v %s %d", n, d.Timestamp, d.Value, d.Context, d.CreatedAt,
				w.TS.UnixMilli(), w.Value, w.Context, w.Created.UnixMilli())
		}
		n++
		return nil
	})
	if err == nil && n != len(want) {
		err = fmt.Errorf("%d dots of the %d stored in the range", n, len(want))
	}
	if err != nil {
		t.Fatalf("export of [%s, %s]: %v", lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano), err)
	}
}

func ptr[T any](v T) *T { return &v }
