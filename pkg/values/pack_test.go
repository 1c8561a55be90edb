package values_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

const (
	day    = 24 * time.Hour
	window = 2 * day
)

// stored is one raw value as the database holds it, in either layout.
type stored struct {
	TS      time.Time
	Value   float64
	Context string
	Created time.Time
}

// bothLayouts reads a variable's values from rows and packed days (created_at rounded
// to the millisecond, as the packed layout keeps it), in timestamp order.
func bothLayouts(t *testing.T, key int64) []stored {
	t.Helper()
	rows, err := env.DB.Pool.Query(context.Background(), `SELECT ts, value, coalesce(context::text, ''),
			date_trunc('milliseconds', created_at + INTERVAL '500 microseconds')
		FROM (SELECT ts, value, context, created_at FROM "values" WHERE variable_id = $1
		      UNION ALL
		      SELECT ts, value, context, created_at FROM packed_values(ARRAY[$1::bigint], '-infinity', 'infinity')) x
		ORDER BY ts`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		if err := rows.Scan(&s.TS, &s.Value, &s.Context, &s.Created); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.DB.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// post writes dots over HTTP (the one write path).
func post(t *testing.T, c *testenv.Client, path string, dots []map[string]any) {
	t.Helper()
	for from := 0; from < len(dots); from += 5000 {
		if r := c.Post(path, dots[from:min(from+5000, len(dots))]); r.Status != 201 && r.Status != 200 {
			t.Fatalf("post %s: %d %s", path, r.Status, r.Body)
		}
	}
}

func variableKey(t *testing.T, device, variable string) int64 {
	t.Helper()
	return int64(count(t, `SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.label = $1 AND v.label = $2`, device, variable))
}

func packer() *values.Packer {
	return &values.Packer{Store: &values.Store{Pool: env.DB.Pool}, After: window, Log: env.Log}
}

// TestPackIsExactResumableAndGivesSpaceBack: packing moves every dot older than the
// window bit for bit (value, timestamp, context, created_at to the ms), leaves the
// newer ones as rows, drops the chunks it emptied, and a run cut short (a single day
// packed, as after a kill) finishes on the next run without losing or doubling a dot.
func TestPackIsExactResumableAndGivesSpaceBack(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	now := time.Now().UTC()
	old := now.Add(-40 * day).Truncate(day)
	rng := rand.New(rand.NewPCG(32, 1))
	var dots []map[string]any
	for i := range 9 * 1440 { // a dot a minute for 9 days, jittered, some with a context
		ts := old.Add(time.Duration(i)*time.Minute + time.Duration(rng.IntN(2000)-1000)*time.Millisecond)
		d := map[string]any{"timestamp": ts.UnixMilli(), "value": math.Round(rng.NormFloat64()*1e4) / 100}
		if i%97 == 0 {
			d["context"] = map[string]any{"i": i, "note": "ctx"}
		}
		dots = append(dots, d)
	}
	for i := range 50 { // and the last hour: not packed
		dots = append(dots, map[string]any{"timestamp": now.Add(-time.Hour + time.Duration(i)*time.Minute).UnixMilli(), "value": rng.Float64()})
	}
	post(t, c, "/api/v1.6/devices/packer/t/values", dots)
	key := variableKey(t, "packer", "t")
	before := bothLayouts(t, key)
	if len(before) != len(dots) {
		t.Fatalf("%d dots stored of %d", len(before), len(dots))
	}

	// a run cut short after one day
	if n, err := (&values.Store{Pool: env.DB.Pool}).PackDay(context.Background(), key, old); err != nil || n == 0 {
		t.Fatalf("pack one day: %v %v", n, err)
	}
	if got := bothLayouts(t, key); !slices.Equal(got, before) {
		t.Fatalf("after one day packed the values differ (%d vs %d)", len(got), len(before))
	}
	res, err := packer().Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Days < 9 {
		t.Errorf("packed %d days, want the 9 old ones (the first one was packed already)", res.Days)
	}
	after := bothLayouts(t, key)
	if !slices.Equal(after, before) {
		for i := range min(len(after), len(before)) {
			if after[i] != before[i] {
				t.Fatalf("dot %d differs after packing:\n before %+v\n after  %+v", i, before[i], after[i])
			}
		}
		t.Fatalf("%d dots after packing, %d before", len(after), len(before))
	}
	if n := count(t, `SELECT count(*) FROM "values" WHERE variable_id = $1`, key); n != 50 {
		t.Errorf("%d rows left in \"values\", want the 50 of the last hour", n)
	}
	if n := count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1`, key); n < 9 {
		t.Errorf("%d packed days, want ≥ 9", n)
	}
	// the space is given back: no chunk of "values" or of the minute tier is left
	// wholly before the window (the old rows' chunks were dropped, not emptied)
	cutoff := now.Add(-window).Truncate(day)
	for _, table := range []string{"values", "value_minutes"} {
		if n := count(t, `SELECT count(*) FROM timescaledb_information.chunks
			WHERE hypertable_name = $1 AND range_end <= $2 AND range_end > $3`, table, cutoff, old); n != 0 {
			t.Errorf("%s: %d chunks before the window remain", table, n)
		}
	}
	if ms, err := (&values.Store{Pool: env.DB.Pool}).CheckVariable(context.Background(), key, time.Time{}); err != nil || len(ms) > 0 {
		t.Errorf("rollups check after packing: %v %+v", err, ms)
	}
	// a second run finds nothing to do
	if res, err := packer().Run(context.Background()); err != nil || res.Days != 0 {
		t.Errorf("second run: %+v %v", res, err)
	}
}

// model is what the variable must hold: timestamp (ms) → value.
type model map[int64]float64

// TestWritesIntoPackedDaysProperty: seeded random writes of new dots, overwrites,
// late data and range deletes on both sides of the window, through two instances, with
// packing runs between them; after each step the values list, E7 statistics and E8
// resamples (5-minute and hourly buckets) over random ranges, the last value and the
// rollup tiers all agree with the model.
func TestWritesIntoPackedDaysProperty(t *testing.T) {
	token := env.NewAccount(t)
	c := env.Client(t).As(token)
	other := env.Instance(t).As(token) // a second instance: half the writes go through it
	rng := rand.New(rand.NewPCG(20261126, 32))
	now := time.Now().UTC()
	first := now.Add(-12 * day).Truncate(day).UnixMilli()
	last := now.Add(-time.Minute).UnixMilli()
	span := last - first
	m := model{}
	path := "/api/v1.6/devices/prop/p/values"
	write := func(ts []int64) {
		var dots []map[string]any
		for _, x := range ts {
			v := math.Round(rng.NormFloat64()*1e5) / 100
			m[x] = v
			dots = append(dots, map[string]any{"timestamp": x, "value": v})
		}
		via := c
		if rng.IntN(2) == 0 {
			via = other
		}
		post(t, via, path, dots)
	}
	// a regular series first, so that packed days are full ones
	var seed []int64
	for x := first; x < last; x += 60_000 {
		seed = append(seed, x+int64(rng.IntN(500)))
	}
	write(seed)
	key := variableKey(t, "prop", "p")
	id := c.Get("/api/v2.0/devices/~prop/variables/~p").Object(t)["id"].(string)

	packedSteps := 0
	for step := range 40 {
		var what string
		switch op := rng.IntN(6); op {
		case 0, 1: // new dots anywhere: late data into old (maybe packed) days, or recent
			n := 1 + rng.IntN(20)
			ts := make([]int64, n)
			for i := range ts {
				ts[i] = first + rng.Int64N(span)
			}
			write(ts)
			what = fmt.Sprintf("%d new dots", n)
		case 2: // overwrite existing dots
			keys := sortedKeys(m)
			ts := make([]int64, 1+rng.IntN(10))
			for i := range ts {
				ts[i] = keys[rng.IntN(len(keys))]
			}
			write(ts)
			what = fmt.Sprintf("%d overwrites", len(ts))
		case 3: // delete a range: inside a day, or across several
			from := first + rng.Int64N(span)
			to := from + rng.Int64N([]int64{3_600_000, 3 * 86_400_000}[rng.IntN(2)])
			if r := [2]*testenv.Client{c, other}[rng.IntN(2)].Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, from, to)); r.Status != 204 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			for x := range m {
				if x >= from && x <= to {
					delete(m, x)
				}
			}
			what = fmt.Sprintf("delete %d..%d", from, to)
		default:
			res, err := packer().Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			what = fmt.Sprintf("pack: %d days", res.Days)
		}
		checkModel(t, c, rng, fmt.Sprintf("step %d (%s)", step, what), id, key, m, first, last)
		if count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1`, key) > 0 {
			packedSteps++
		}
	}
	// Whether a packed day is left at the end depends on where the clock puts the
	// random timestamps (later writes unpack days, deletes empty them): count the steps
	// that ended with packed days instead.
	t.Logf("%d of 40 steps ended with a packed day", packedSteps)
	if packedSteps < 5 {
		t.Errorf("%d of 40 steps ended with a packed day: the test hardly tested the packed layout", packedSteps)
	}
}

func sortedKeys(m model) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkModel compares what the service answers with the model.
func checkModel(t *testing.T, c *testenv.Client, rng *rand.Rand, step, id string, key int64, m model, first, last int64) {
	t.Helper()
	keys := sortedKeys(m)
	// the whole list, newest first, in pages
	var got []int64
	for page := 1; ; page++ {
		r := c.Get(fmt.Sprintf("/api/v1.6/variables/%s/values?page_size=5000&page=%d", id, page))
		if r.Status != 200 {
			t.Fatalf("%s: values list: %d %s", step, r.Status, r.Body)
		}
		var body struct {
			Next    *string `json:"next"`
			Results []struct {
				Value     float64 `json:"value"`
				Timestamp int64   `json:"timestamp"`
			} `json:"results"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s: values list: %v %s", step, err, r.Body)
		}
		for _, d := range body.Results {
			if want, ok := m[d.Timestamp]; !ok || want != d.Value {
				t.Fatalf("%s: values list has %d = %v, the model %v (%v)", step, d.Timestamp, d.Value, want, ok)
			}
			got = append(got, d.Timestamp)
		}
		if body.Next == nil {
			break
		}
	}
	if len(got) != len(keys) || !slices.IsSortedFunc(got, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("%s: the values list holds %d dots (sorted newest first: %v), the model %d", step, len(got),
			slices.IsSortedFunc(got, func(a, b int64) int { return int(b - a) }), len(keys))
	}
	// E7 over random ranges
	for range 3 {
		from := first + rng.Int64N(last-first)
		to := from + rng.Int64N(last-from)
		checkStatistics(t, c, step, id, m, from, to)
		checkResample(t, c, step, id, m, from, to, []int64{5, 60}[rng.IntN(2)])
	}
	// the last value
	v := c.Get("/api/v2.0/variables/" + id + "/").Object(t)["lastValue"].(map[string]any)
	if newest := keys[len(keys)-1]; int64(v["timestamp"].(float64)) != newest || v["value"].(float64) != m[newest] {
		t.Fatalf("%s: lastValue %v, the model %d = %v", step, v, newest, m[newest])
	}
	if ms, err := (&values.Store{Pool: env.DB.Pool}).CheckVariable(context.Background(), key, time.Time{}); err != nil || len(ms) > 0 {
		t.Fatalf("%s: rollups check: %v %+v", step, err, ms)
	}
}

// checkStatistics compares E7's count, sum, min, max, first and last over [from, to]
// with the model.
func checkStatistics(t *testing.T, c *testenv.Client, step, id string, m model, from, to int64) {
	t.Helper()
	var n int
	var sum, lo, hi, firstV, lastV float64
	var firstTS, lastTS int64 = math.MaxInt64, math.MinInt64
	lo, hi = math.Inf(1), math.Inf(-1)
	for ts, v := range m {
		if ts < from || ts > to {
			continue
		}
		n, sum, lo, hi = n+1, sum+v, min(lo, v), max(hi, v)
		if ts < firstTS {
			firstTS, firstV = ts, v
		}
		if ts > lastTS {
			lastTS, lastV = ts, v
		}
	}
	r := c.Post("/api/v2.0/data/statistics/", map[string]any{"variables": []any{map[string]any{"variable": id}},
		"aggregations": []string{"count", "sum", "min", "max", "first", "last"}, "start": from, "end": to})
	if r.Status != 200 {
		t.Fatalf("%s: statistics: %d %s", step, r.Status, r.Body)
	}
	var body struct {
		Results []struct {
			Results map[string]struct {
				Value float64 `json:"value"`
			} `json:"results"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Results) != 1 {
		t.Fatalf("%s: statistics: %v %s", step, err, r.Body)
	}
	res := body.Results[0].Results
	num := func(k string) float64 { return res[k].Value }
	if int(num("count")) != n {
		t.Fatalf("%s: count over %d..%d: %v, the model %d", step, from, to, res["count"], n)
	}
	if n == 0 {
		return
	}
	if math.Abs(num("sum")-sum) > 1e-9*max(1, math.Abs(sum)) || num("min") != lo || num("max") != hi ||
		num("first") != firstV || num("last") != lastV {
		t.Fatalf("%s: statistics over %d..%d: %v; the model n %d sum %v min %v max %v first %v last %v",
			step, from, to, res, n, sum, lo, hi, firstV, lastV)
	}
}

// checkResample compares E8's mean over [from, to] in buckets of n minutes (UTC, from
// the midnight of the first value in range, as pandas' origin='start_day') with the
// model: every bucket from the first to the last non-empty one, newest first, null
// when empty.
func checkResample(t *testing.T, c *testenv.Client, step, id string, m model, from, to, minutes int64) {
	t.Helper()
	width := minutes * 60_000
	sums, counts := map[int64]float64{}, map[int64]int{}
	var earliest int64 = math.MaxInt64
	for ts := range m {
		if ts >= from && ts <= to {
			earliest = min(earliest, ts)
		}
	}
	var want [][2]any
	if earliest != math.MaxInt64 {
		origin := earliest - earliest%86_400_000
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for ts, v := range m {
			if ts < from || ts > to {
				continue
			}
			b := origin + (ts-origin)/width*width
			sums[b] += v
			counts[b]++
			lo, hi = min(lo, b), max(hi, b)
		}
		for b := hi; b >= lo; b -= width {
			if counts[b] == 0 {
				want = append(want, [2]any{b, nil})
				continue
			}
			want = append(want, [2]any{b, sums[b] / float64(counts[b])})
		}
	}
	r := c.Post("/api/v1.6/data/stats/resample/", map[string]any{"variables": []string{id}, "aggregation": "mean",
		"period": fmt.Sprintf("%dT", minutes), "start": from, "end": to})
	if r.Status != 200 {
		t.Fatalf("%s: resample: %d %s", step, r.Status, r.Body)
	}
	var body struct {
		Results [][][2]*float64 `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Results) != 1 {
		t.Fatalf("%s: resample: %v %s", step, err, r.Body)
	}
	got := body.Results[0]
	if len(got) != len(want) {
		t.Fatalf("%s: resample %dT over %d..%d: %d buckets, the model %d", step, minutes, from, to, len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g[0] == nil || int64(*g[0]) != w[0].(int64) {
			t.Fatalf("%s: resample bucket %d labelled %v, the model %v", step, i, g[0], w[0])
		}
		wv, ok := w[1].(float64)
		if (g[1] == nil) != !ok || ok && math.Abs(*g[1]-wv) > 1e-9*max(1, math.Abs(wv)) {
			t.Fatalf("%s: resample %dT bucket %d (%v): %v, the model %v", step, minutes, i, w[0], g[1], w[1])
		}
	}
}

// TestPackKeepsEveryBitPattern: values are packed and read back bit for bit: −0,
// subnormals, ±max, ±Inf (a value loaded by hand; the API refuses them) and 20,000
// seeded random bit patterns (NaN aside). A day holding a timestamp with a microsecond
// part is left as rows (the packed layout keeps milliseconds), the others are packed.
func TestPackKeepsEveryBitPattern(t *testing.T) {
	ctx := context.Background()
	s := env.Seed(t, env.NewAccount(t), "bits", "v", nil)
	special := []float64{math.Copysign(0, -1), 0, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		2.2250738585072009e-308, math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.Nextafter(1, 2), 1e-310}
	rng := rand.New(rand.NewPCG(32, 64))
	vals := special
	for len(vals) < 20_000 {
		if f := math.Float64frombits(rng.Uint64()); !math.IsNaN(f) {
			vals = append(vals, f)
		}
	}
	day0 := time.Date(1995, 6, 1, 0, 0, 0, 0, time.UTC)
	ts := make([]time.Time, len(vals))
	for i := range ts { // two days at ~8.6 s, irregular milliseconds
		ts[i] = day0.Add(time.Duration(i)*8640*time.Millisecond + time.Duration(rng.IntN(999))*time.Millisecond)
	}
	fine := day0.Add(3*day + 123456*time.Microsecond) // a third day: one timestamp with µs
	ts, vals = append(ts, fine, day0.Add(3*day+time.Hour)), append(vals, 1.5, 2.5)
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value)
		SELECT $1, t, v FROM unnest($2::timestamptz[], $3::float8[]) AS u(t, v)`, s.VariableKey, ts, vals); err != nil {
		t.Fatal(err)
	}
	bits := func() map[time.Time]uint64 {
		out := map[time.Time]uint64{}
		for _, d := range bothLayouts(t, s.VariableKey) {
			out[d.TS] = math.Float64bits(d.Value)
		}
		return out
	}
	before := bits()
	st := &values.Store{Pool: env.DB.Pool}
	for d := day0; d.Before(day0.Add(4 * day)); d = d.Add(day) {
		n, err := st.PackDay(ctx, s.VariableKey, d)
		if err != nil {
			t.Fatal(err)
		}
		if ok, want := n > 0, d.Before(day0.Add(2*day)); ok != want { // day 3 is empty, day 4 has a µs timestamp
			t.Errorf("day %s packed %v, want %v", d.Format(time.DateOnly), ok, want)
		}
	}
	after := bits()
	if len(after) != len(before) || len(before) != len(vals) {
		t.Fatalf("%d values after packing, %d before, %d written", len(after), len(before), len(vals))
	}
	for at, b := range before {
		if after[at] != b {
			t.Fatalf("value at %s: bits %016x after packing, %016x before", at.Format(time.RFC3339Nano), after[at], b)
		}
	}
	if n := count(t, `SELECT count(*) FROM "values" WHERE variable_id = $1`, s.VariableKey); n != 2 {
		t.Errorf("%d rows left, want the 2 of the day with a µs timestamp", n)
	}
}

// TestPackMergesAPackedDayWithRowsBeside: rows loaded by hand into a day that is packed
// already (no writer leaves them so) are merged with its packed dots when the day is
// packed again: one packed row holding both, no row left, every value as it was.
func TestPackMergesAPackedDayWithRowsBeside(t *testing.T) {
	ctx := context.Background()
	s := env.Seed(t, env.NewAccount(t), "merge", "v", nil)
	day := time.Date(1996, 3, 1, 0, 0, 0, 0, time.UTC)
	load := func(from time.Time, n int) {
		t.Helper()
		if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO "values" (variable_id, ts, value)
			SELECT $1, $2::timestamptz + i * INTERVAL '1 minute', i FROM generate_series(0, $3 - 1) AS i`,
			s.VariableKey, from, n); err != nil {
			t.Fatal(err)
		}
	}
	load(day, 60) // the day's first hour, packed
	st := &values.Store{Pool: env.DB.Pool}
	if n, err := st.PackDay(ctx, s.VariableKey, day); err != nil || n != 60 {
		t.Fatalf("pack the first hour: %d %v", n, err)
	}
	load(day.Add(2*time.Hour), 30) // then rows beside the packed row
	before := bothLayouts(t, s.VariableKey)
	if len(before) != 90 {
		t.Fatalf("%d values before, want 90", len(before))
	}
	if n, err := st.PackDay(ctx, s.VariableKey, day); err != nil || n != 90 {
		t.Fatalf("pack the day again: %d %v, want the 90 values", n, err)
	}
	if got := bothLayouts(t, s.VariableKey); !slices.Equal(got, before) {
		t.Fatalf("after the merge the values differ (%d vs %d)", len(got), len(before))
	}
	if n := count(t, `SELECT count(*) FROM values_packed WHERE variable_id = $1`, s.VariableKey); n != 1 {
		t.Errorf("%d packed rows, want 1", n)
	}
	if n := count(t, `SELECT count(*) FROM "values" WHERE variable_id = $1`, s.VariableKey); n != 0 {
		t.Errorf("%d rows left, want 0", n)
	}
}
