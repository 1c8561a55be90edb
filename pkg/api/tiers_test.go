package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	an "github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// driftScope is the first variable key a rollupDrift check looks at: the variables
// created since a test began (newDriftScope), deleted ones included, whoever created
// them. A write that updated the wrong variable's tiles leaves its own variable's
// tiles wrong, which the scope sees; the data of the tests before it is not scanned
// again on every check (a whole-database check cost ~5 s of the database's time each,
// a third of this package's serial phase: docs/testing.md).
type driftScope int64

// newDriftScope is the scope of the variables created from now on.
func newDriftScope(t *testing.T) driftScope {
	t.Helper()
	var last int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM variables`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return driftScope(last + 1)
}

// rollupDrift counts the (variable, tile) pairs of the scope's variables, in every tier,
// where the tier differs from the rollup recomputed from the raw values right now
// (driftSource): every committed transaction keeps the two equal, whatever else runs
// (the tiles that end by their variable's rollups_until, pkg/values rollupmark.go).
// rollups counts the minute tiles.
func rollupDrift(t *testing.T, scope driftScope) (drift, rollups int) {
	t.Helper()
	for _, tier := range tiers.All {
		var d, n int
		width := fmt.Sprintf("%d seconds", int64(tier.Width.Seconds()))
		// m2 from values shifted by their tile's min: a one-pass var_pop of 1e6 ± 0.01
		// is itself off by 1e-8. A sum's rounding depends on the order of its terms
		// (the plan's), up to ~n·ε·Σ|value|: 1e308 − 1e308 + 1.2e22 is 1.2e22 or 0.
		err := env.DB.NewRaw(`WITH truth AS (
			SELECT variable_id, tile,
			       count(*)::int AS n, `+querybuilder.SumSQL("value")+` AS sum, sum(abs(value)::numeric) AS sumabs, min(value) AS min, max(value) AS max,
			       CASE WHEN max(abs(value)) <= 1e150 AND NOT bool_or(value <> 0 AND abs(value) < 1e-100) -- no spread beyond: it would overflow or underflow
			           THEN var_pop(value - lo) FILTER (WHERE abs(value) <= 1e150 AND abs(lo) <= 1e150) * count(*) END AS m2, min(ts) AS first_ts, max(ts) AS last_ts,
			       (array_agg(value ORDER BY ts))[1] AS first_value, (array_agg(value ORDER BY ts DESC))[1] AS last_value,
			       (array_agg(ts ORDER BY value, ts))[1] AS min_ts, (array_agg(ts ORDER BY value DESC, ts))[1] AS max_ts,
			       -- the signal inside (time-aware aggregations), unless a value lies beyond the spread's limits
			       CASE WHEN bool_and(ok) THEN coalesce(sum(pv * dt) FILTER (WHERE ok AND pok), 0) END AS area_locf,
			       CASE WHEN bool_and(ok) THEN coalesce(sum((pv + value) / 2 * dt) FILTER (WHERE ok AND pok), 0) END AS area_linear,
			       CASE WHEN bool_and(ok) THEN coalesce(sum(CASE WHEN value < pv THEN value ELSE value - pv END) FILTER (WHERE ok AND pok), 0) END AS increase,
			       CASE WHEN bool_and(ok) THEN coalesce(max(dt), 0) END AS longest_ms
			FROM (SELECT x.*, (x.value = 0 OR abs(x.value) BETWEEN 1e-100 AND 1e150) AS ok, (x.pv = 0 OR abs(x.pv) BETWEEN 1e-100 AND 1e150) AS pok
			      FROM (SELECT x.*, time_bucket(?::interval, x.ts) AS tile,
			                   min(x.value) OVER (PARTITION BY x.variable_id, time_bucket(?::interval, x.ts)) AS lo,
			                   lag(x.value) OVER d AS pv, (extract(epoch FROM x.ts - lag(x.ts) OVER d) * 1000)::bigint AS dt
			            FROM `+driftSource(tier, scope)+` x
			            WHERE x.variable_id >= ?
			            WINDOW d AS (PARTITION BY x.variable_id, time_bucket(?::interval, x.ts) ORDER BY x.ts)) x) x
			GROUP BY 1, 2
		)
		SELECT count(*) FILTER (WHERE t.n IS DISTINCT FROM m.n OR t.min IS DISTINCT FROM m.min
		                          OR t.max IS DISTINCT FROM m.max OR t.sum IS NULL OR m.sum IS NULL
		                          OR CASE WHEN abs(t.sum) < 'Infinity' AND abs(m.sum) < 'Infinity' -- IEEE sums: ±Infinity past the largest double
		                              THEN abs(t.sum::numeric - m.sum::numeric) > 1e-9 * greatest(1, t.sumabs)
		                              ELSE t.sum IS DISTINCT FROM m.sum END
		                          OR (t.m2 IS NULL) <> (m.m2 IS NULL) OR abs(t.m2 - m.m2) > 1e-9 * greatest(1, t.m2)
		                          OR t.first_ts IS DISTINCT FROM m.first_ts OR t.last_ts IS DISTINCT FROM m.last_ts
		                          OR t.first_value IS DISTINCT FROM m.first_value OR t.last_value IS DISTINCT FROM m.last_value
		                          OR t.min_ts IS DISTINCT FROM m.min_ts OR t.max_ts IS DISTINCT FROM m.max_ts
		                          OR t.longest_ms IS DISTINCT FROM m.longest_ms
		                          OR CASE WHEN t.longest_ms IS NOT NULL AND m.longest_ms IS NOT NULL -- values within ±1e150: no overflow
		                              THEN abs(t.area_locf - m.area_locf) > 1e-9 * (abs(t.area_locf) + greatest(abs(t.min), abs(t.max), 1) * ?)
		                                OR abs(t.area_linear - m.area_linear) > 1e-9 * (abs(t.area_linear) + greatest(abs(t.min), abs(t.max), 1) * ?)
		                                OR abs(t.increase - m.increase) > 1e-9 * (abs(t.increase) + greatest(abs(t.min), abs(t.max), 1) * t.n) END),
		       count(m.n)
		FROM truth t FULL JOIN (SELECT * FROM `+tier.Table+` WHERE variable_id >= ?) m USING (variable_id, tile)
		LEFT JOIN variables v ON v.id = variable_id
		WHERE `+tileComplete(tier, "tile"), width, width, scope, width, tier.Width.Milliseconds(), tier.Width.Milliseconds(), scope).
			Scan(context.Background(), &d, &n)
		if err != nil {
			t.Fatal(err)
		}
		drift += d
		if tier == tiers.Minutes {
			rollups = n
		}
	}
	return drift, rollups
}

// tileComplete is the condition on tier's tiles (their start: the column tile) that
// must be exact: those that end by their variable's rollups_until (v: the variable,
// none when it was deleted).
func tileComplete(tier tiers.Tier, tile string) string {
	return fmt.Sprintf("(v.id IS NULL OR %s + INTERVAL '%d seconds' <= v.rollups_until)", tile, int64(tier.Width.Seconds()))
}

// driftSource is what a tier summarises: the minute tier the rows of "values" (packed
// days have no minute tiles), the coarser tiers both layouts.
func driftSource(tier tiers.Tier, scope driftScope) string {
	if tier == tiers.Minutes {
		return `"values"`
	}
	return fmt.Sprintf(`(SELECT variable_id, ts, value FROM "values"
		UNION ALL SELECT variable_id, ts, value FROM packed_values(ARRAY(SELECT id FROM variables WHERE id >= %d), '-infinity', 'infinity'))`, scope)
}

// TestTiersFollowEveryWrite drives every kind of write through the API (new
// dots, retries that replace values, concurrent writers sharing minutes, a range
// delete whose ends fall inside minutes, variable and device deletes) and checks the
// per-minute rollups the analytics read against the values after each step.
func TestTiersFollowEveryWrite(t *testing.T) {
	scope := newDriftScope(t)
	c := env.Client(t).As(env.NewAccount(t))
	rng := rand.New(rand.NewPCG(7, 7))
	const t0 = int64(1767225600000) // 2026-01-01T00:00Z
	// irregular dots, a few a minute, values of both signs
	dots := func(n int, from, gapMs int64) []any {
		out := make([]any, n)
		ts := from
		for i := range out {
			ts += 1 + rng.Int64N(gapMs)
			out[i] = map[string]any{"value": rng.Float64()*200 - 100, "timestamp": ts}
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		if drift, n := rollupDrift(t, scope); drift != 0 || (n == 0 && step == "new dots") {
			t.Fatalf("after %s: %d of %d minute rollups differ from the values", step, drift, n)
		}
	}
	post := func(path string, body any) {
		t.Helper()
		if r := c.Post(path, body); r.Status != 200 && r.Status != 201 {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
	}

	first := dots(600, t0, 20_000)
	post("/api/v1.6/devices/roll/", map[string]any{"a": first, "b": dots(300, t0, 40_000), "c": dots(50, t0, 40_000)})
	check("new dots")

	// a retry of part of the batch with new values: the minutes' min and max must be
	// able to move both ways, which adding cannot do
	retry := make([]any, 0, 200)
	for i := 100; i < 300; i++ {
		d := first[i].(map[string]any)
		retry = append(retry, map[string]any{"value": -d["value"].(float64) * 3, "timestamp": d["timestamp"]})
	}
	post("/api/v1.6/devices/roll/a/values", retry)
	check("replacing dots")

	// writers racing on the same minutes of one variable, some on the same timestamps
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 5 {
				batch := make([]any, 40)
				for i := range batch {
					ts := t0 + int64((w*7+k*13+i*29)%3600)*1000 // one hour, overlapping
					batch[i] = map[string]any{"value": float64(w*100 + i), "timestamp": ts}
				}
				if r := c.Post("/api/v1.6/devices/roll/a/values", batch); r.Status != 201 {
					t.Errorf("writer %d: %d %s", w, r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	check("concurrent writers")

	id := variableIDIn(t, c, "roll", "a")
	from, to := t0+7*60_000+12_345, t0+95*60_000+47_001 // both ends inside a minute
	if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, from, to)); r.Status != 204 && r.Status != 200 {
		t.Fatalf("delete range: %d %s", r.Status, r.Body)
	}
	check("range delete")
	// a delete of one whole minute: its rollup must go, not stay with n = 0
	whole := t0 + 3*60_000 // holds values of the first batch and of the racing writers
	if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, whole, whole+59_999)); r.Status != 204 && r.Status != 200 {
		t.Fatalf("delete minute: %d %s", r.Status, r.Body)
	}
	check("one-minute delete")
	var left int
	_ = env.DB.NewRaw(`SELECT count(*) FROM value_minutes m JOIN variables v ON v.id = m.variable_id
		WHERE v.public_id = ? AND m.tile > to_timestamp(?::float8 / 1000) AND m.tile + INTERVAL '1 minute' <= to_timestamp(?::float8 / 1000)`,
		id, from, to).Scan(context.Background(), &left)
	if left != 0 {
		t.Fatalf("%d rollups left inside the deleted range", left)
	}

	if r := c.Delete("/api/v2.0/variables/" + variableIDIn(t, c, "roll", "b")); r.Status != 204 {
		t.Fatalf("delete variable: %d %s", r.Status, r.Body)
	}
	check("variable delete")
	if r := c.Delete("/api/v2.0/devices/~roll"); r.Status != 204 {
		t.Fatalf("delete device: %d %s", r.Status, r.Body)
	}
	check("device delete")
}

// variableIDIn reads a variable's public id through the API.
func variableIDIn(t *testing.T, c *testenv.Client, device, variable string) string {
	t.Helper()
	r := c.Get("/api/v2.0/devices/~" + device + "/variables/~" + variable)
	if r.Status != 200 {
		t.Fatalf("variable %s/%s: %d %s", device, variable, r.Status, r.Body)
	}
	return r.Object(t)["id"].(string)
}

// denseAcrossEpoch is a series a few seconds apart (irregular milliseconds, several
// values a minute) from before 1973-01-01, where minute rollups are not used, to after.
func denseAcrossEpoch(n int) []testenv.Point {
	rng := rand.New(rand.NewPCG(3, 9))
	pts := make([]testenv.Point, n)
	ts := int64(94_694_400_000) - 40*60_000 // 1972-12-31T23:20Z
	for i := range pts {
		ts += 1 + rng.Int64N(7_000)
		pts[i] = testenv.Point{TS: ts, Value: float64(rng.IntN(9)-4) / 2} // ties everywhere
	}
	return pts
}

// TestSummariesMatchRawValues: answers read from minute rollups plus raw values at the
// ends equal answers computed here from the values themselves, for ranges whose ends
// fall inside minutes, inside one minute, and across 1973-01-01.
func TestSummariesMatchRawValues(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	pts := denseAcrossEpoch(3000) // about 3 hours
	s := env.Seed(t, c.Token, "dense", "v", pts)
	first, last := pts[0].TS, pts[len(pts)-1].TS
	minute := pts[900].TS / 60_000 * 60_000
	ranges := [][2]int64{
		{first, last},
		{first + 61_234, last - 47_890}, // both ends inside minutes
		{minute + 1, minute + 59_998},   // inside one minute
		{minute, last},                  // from the start of a minute: the extremes lie in rollups
		{94_694_400_000 - 123_456, 94_694_400_000 + 7_654_321},
	}
	for _, rg := range ranges {
		t.Run(fmt.Sprintf("%d..%d", rg[0], rg[1]), func(t *testing.T) {
			ref := referenceStats(pts, rg[0], rg[1])
			ans := postStats(t, c, statsBody{"start": rg[0], "end": rg[1], "variables": []any{statsBody{"variable": s.VariableID}},
				"aggregations": []string{"count", "sum", "mean", "min", "max", "first", "last"}})
			res := entry(t, ans, 0)["results"].(map[string]any)
			if ref.n == 0 {
				t.Fatalf("range holds no values; the fixture should hold some")
			}
			checkAgg(t, res, "count", float64(ref.n), nil)
			checkAgg(t, res, "sum", ref.sum, nil)
			checkAgg(t, res, "mean", ref.mean, nil)
			// min and max with the earliest of their many holders
			checkAgg(t, res, "min", ref.min.Value, &ref.min.TS)
			checkAgg(t, res, "max", ref.max.Value, &ref.max.TS)
			checkAgg(t, res, "first", ref.first.Value, &ref.first.TS)
			checkAgg(t, res, "last", ref.last.Value, &ref.last.TS)
			checkResampleAgainstValues(t, c, s.VariableID, pts, rg, "5T", 5*60_000, time.UTC)
		})
	}
}

// TestSummariesKeepSecondsOffsets: before 1973 some zones were seconds off UTC
// (Africa/Monrovia -0:44:30 until 1972), so their buckets split minutes: those values
// are resampled one by one, not from minute rollups.
func TestSummariesKeepSecondsOffsets(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	pts := denseAcrossEpoch(3000)
	for i := range pts {
		pts[i].TS -= 2 * 365 * 86_400_000 // 1971
	}
	s := env.Seed(t, c.Token, "monrovia", "v", pts)
	monrovia, err := time.LoadLocation("Africa/Monrovia")
	if err != nil {
		t.Fatal(err)
	}
	checkResampleAgainstValues(t, c, s.VariableID, pts, [2]int64{pts[0].TS, pts[len(pts)-1].TS}, "1H", 3_600_000, monrovia)
}

// checkResampleAgainstValues resamples the variable in range with every aggregation
// and compares with referenceBuckets.
func checkResampleAgainstValues(t *testing.T, c *testenv.Client, id string, pts []testenv.Point, rg [2]int64,
	period string, width int64, loc *time.Location) {
	t.Helper()
	for _, agg := range []string{"count", "sum", "min", "max", "mean"} {
		want := referenceBuckets(pts, rg[0], rg[1], width, agg, loc)
		r := c.Post(resamplePath, map[string]any{"variables": []string{id}, "aggregation": agg,
			"period": period, "tz": loc.String(), "start": rg[0], "end": rg[1]})
		if r.Status != 200 {
			t.Fatalf("resample %s: %d %s", agg, r.Status, r.Body)
		}
		var got struct {
			Results [][][2]*float64 `json:"results"`
		}
		if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Results) != 1 {
			t.Fatalf("resample %s: %v %s", agg, err, r.Body)
		}
		if len(got.Results[0]) != len(want) {
			t.Fatalf("resample %s: %d buckets, want %d", agg, len(got.Results[0]), len(want))
		}
		for i, b := range got.Results[0] {
			if int64(*b[0]) != want[i].TS || !closeTo(*b[1], want[i].Value) {
				t.Fatalf("resample %s bucket %d: [%v %v], want %+v", agg, i, *b[0], *b[1], want[i])
			}
		}
	}
}

// referenceBuckets resamples the points in [start, end] into buckets of width ms from
// local midnight (in loc) of the first point's day, newest first, for buckets holding
// values (the series are dense, so no bucket inside them is empty).
func referenceBuckets(pts []testenv.Point, start, end, width int64, agg string, loc *time.Location) []testenv.Point {
	type acc struct {
		n             int
		sum, min, max float64
	}
	var origin int64 = -1
	buckets := map[int64]*acc{}
	for _, p := range pts {
		if p.TS < start || p.TS > end {
			continue
		}
		if origin < 0 {
			y, m, d := time.UnixMilli(p.TS).In(loc).Date()
			origin = time.Date(y, m, d, 0, 0, 0, 0, loc).UnixMilli()
		}
		k := origin + (p.TS-origin)/width*width
		a := buckets[k]
		if a == nil {
			a = &acc{min: p.Value, max: p.Value}
			buckets[k] = a
		}
		a.n++
		a.sum += p.Value
		a.min, a.max = min(a.min, p.Value), max(a.max, p.Value)
	}
	out := make([]testenv.Point, 0, len(buckets))
	for k, a := range buckets {
		v := map[string]float64{"count": float64(a.n), "sum": a.sum, "min": a.min, "max": a.max, "mean": a.sum / float64(a.n)}[agg]
		out = append(out, testenv.Point{TS: k, Value: v})
	}
	slices.SortFunc(out, func(a, b testenv.Point) int { return cmp.Compare(b.TS, a.TS) })
	return out
}

// TestAggregationFromSummariesMatchesValues: E9 reads minute rollups and probes the
// values only for the timestamps; with values from a small set (ties everywhere, also
// between variables inside one minute) and range ends inside minutes, every
// aggregation and both join modes equal the answer computed here from the values.
func TestAggregationFromSummariesMatchesValues(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	rng := rand.New(rand.NewPCG(5, 5))
	const t0 = int64(1767225600000) // 2026-01-01T00:00Z
	series := make([][]testenv.Point, 2)
	ids := make([]string, 2)
	for v := range series {
		ts := t0
		for range 1500 {
			ts += 1 + rng.Int64N(6_000)
			series[v] = append(series[v], testenv.Point{TS: ts, Value: float64(rng.IntN(7)) - 3})
		}
		ids[v] = env.Seed(t, c.Token, "ties", fmt.Sprintf("v%d", v), series[v]).VariableID
	}
	// the second variable reaches the extremes earlier inside a minute where the first
	// one reaches them too, so only probed timestamps can break the tie across them
	series[0][700].Value, series[0][701].Value = 9, -9
	m := series[0][700].TS / 60_000 * 60_000
	extra := []testenv.Point{{TS: m + 1, Value: 9}, {TS: m + 2, Value: -9}}
	if r := c.Post("/api/v1.6/variables/"+ids[1]+"/values", []map[string]any{
		{"timestamp": extra[0].TS, "value": 9}, {"timestamp": extra[1].TS, "value": -9}}); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	series[1] = append(series[1], extra...)
	if r := c.Post("/api/v1.6/variables/"+ids[0]+"/values", []map[string]any{
		{"timestamp": series[0][700].TS, "value": 9}, {"timestamp": series[0][701].TS, "value": -9}}); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	start, end := t0+30_500, series[0][1400].TS+17
	for _, agg := range []string{"mean", "sum", "count", "min", "max"} {
		for _, join := range []bool{false, true} {
			r := c.Post(aggregationPath, map[string]any{"variables": ids, "aggregation": agg, "join_dataframes": join,
				"start": start, "end": end})
			if r.Status != 200 {
				t.Fatalf("%s join=%v: %d %s", agg, join, r.Status, r.Body)
			}
			var got struct {
				Results json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			want := referenceAggregation(series, start, end, agg, join)
			if err := sameResults(decodeNumbers(t, want), decodeNumbers(t, got.Results)); err != nil {
				t.Fatalf("%s join=%v: %v\n got %s\nwant %s", agg, join, err, got.Results, want)
			}
		}
	}
}

// referenceAggregation is E9 computed from the values: the value, and the latest
// timestamp in range (mean, sum, count) or the earliest reaching the extreme (min, max).
func referenceAggregation(series [][]testenv.Point, start, end int64, agg string, join bool) []byte {
	one := func(pts []testenv.Point) []any {
		var n int
		var sum float64
		var last, ext testenv.Point
		for _, p := range pts {
			if p.TS < start || p.TS > end {
				continue
			}
			better := n == 0 || (agg == "min" && (p.Value < ext.Value || p.Value == ext.Value && p.TS < ext.TS)) ||
				(agg == "max" && (p.Value > ext.Value || p.Value == ext.Value && p.TS < ext.TS))
			if better {
				ext = p
			}
			if n == 0 || p.TS > last.TS {
				last = p
			}
			n++
			sum += p.Value
		}
		switch {
		case n == 0:
			return []any{}
		case agg == "min" || agg == "max":
			return []any{[]any{ext.TS, ext.Value}}
		}
		v := map[string]float64{"mean": sum / float64(n), "sum": sum, "count": float64(n)}[agg]
		return []any{[]any{last.TS, v}}
	}
	var out []any
	if join {
		var all []testenv.Point
		for _, s := range series {
			all = append(all, s...)
		}
		out = one(all)
	} else {
		for _, s := range series {
			out = append(out, one(s))
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// TestRebuildTiersRepairsDrift: rollups left wrong by writes outside the write path
// (values inserted by hand, a binary without rollups) are recomputed by
// RebuildMinutes, from its since minute on only.
func TestRebuildTiersRepairsDrift(t *testing.T) {
	scope := newDriftScope(t)
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	const t0 = int64(1767225600000)
	s := env.Seed(t, c.Token, "drift", "v", denseAcrossEpoch(600))
	since := time.UnixMilli(t0).UTC()
	for _, q := range []string{
		// before since: stays wrong
		`UPDATE value_minutes SET n = n + 1 WHERE variable_id = ? AND tile = (SELECT min(tile) FROM value_minutes WHERE variable_id = ?)`,
		// from since on: two values written around the write path, their tiles missing
		// (two minutes, two quarters and a day)
		`INSERT INTO "values" (variable_id, ts, value) VALUES (?, '2026-01-01T00:10:00.5Z', 1), (?, '2026-01-01T00:20:00Z', 2)`,
	} {
		if _, err := env.DB.ExecContext(ctx, q, s.VariableKey, s.VariableKey); err != nil {
			t.Fatal(err)
		}
	}
	if drift, _ := rollupDrift(t, scope); drift != 6 {
		t.Fatalf("%d rollups drifted, want the 6 made here", drift)
	}
	st := &values.Store{Pool: env.DB.Pool}
	var calls int
	if err := st.RebuildTiers(ctx, since, func(done, total int) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if drift, _ := rollupDrift(t, scope); drift != 1 || calls == 0 {
		t.Fatalf("after rebuilding since %v: %d rollups differ (want the 1 before it), %d progress calls", since, drift, calls)
	}
	if err := st.RebuildTiers(ctx, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if drift, _ := rollupDrift(t, scope); drift != 0 {
		t.Fatalf("after rebuilding all: %d rollups differ", drift)
	}
}

// TestZoneCheckAgainstTheDatabase: the check every resample statement carries says yes
// when the database's tz data gives a zone the offsets the service planned with, and
// no when it does not (the service's Kathmandu, +05:45, asked of Kolkata, +05:30: what
// a database with other tz rules would answer), so that such a statement reads raw
// values instead of tiles that might straddle its buckets.
func TestZoneCheckAgainstTheDatabase(t *testing.T) {
	from, to := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ask := func(q querybuilder.Query) bool {
		t.Helper()
		var ok bool
		if err := env.DB.NewRaw(q.SQL, store.BindArgs(q.Args)...).Scan(context.Background(), &ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, zone := range []string{"UTC", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe", "America/St_Johns", "Europe/Berlin"} {
		q, err := querybuilder.ZoneCheck(zone, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !ask(q) {
			t.Errorf("%s: the database's offsets differ from the service's over %s..%s", zone, from, to)
		}
	}
	q, err := querybuilder.ZoneCheck("Asia/Kathmandu", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if q.Args[0] != "Asia/Kathmandu" {
		t.Fatalf("the zone is not the first argument: %v", q.Args)
	}
	q.Args[0] = "Asia/Kolkata"
	if ask(q) {
		t.Error("Kathmandu's offsets pass as Kolkata's")
	}
}

// TestZoneGuardFallsBackToRawValues: a resample whose zone check fails (the database's
// tz data disagrees with the service's) reads raw values only. Inside a transaction
// that is rolled back, the tiles of a fresh variable are made wrong: the statement then
// answers from them (its answer changes), the same statement with its check forced
// false does not (its answer is the one from before).
func TestZoneGuardFallsBackToRawValues(t *testing.T) {
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	const t0 = int64(1767225600000)
	pts := make([]testenv.Point, 1500)
	for i := range pts {
		pts[i] = testenv.Point{TS: t0 + 3500 + int64(i)*7000, Value: float64(i % 13)}
	}
	s := env.Seed(t, c.Token, "zone-guard", "v", pts)
	start, end := time.UnixMilli(t0+1234).UTC(), time.UnixMilli(t0+3*3_600_000-567).UTC()
	q, err := querybuilder.Resample(querybuilder.ResampleRequest{AccountID: s.AccountID, VariableIDs: []string{s.VariableID},
		Aggregation: "sum", Period: querybuilder.Period{Unit: querybuilder.Hour, N: 1}, Zone: "Asia/Kathmandu",
		Start: &start, End: &end})
	if err != nil {
		t.Fatal(err)
	}
	forced := q
	forced.SQL = strings.Replace(q.SQL, "coalesce(bool_and(", "coalesce(false AND bool_and(", 1)
	if forced.SQL == q.SQL {
		t.Fatal("the statement carries no zone check")
	}
	tx, err := env.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	run := func(q querybuilder.Query) []an.Row {
		t.Helper()
		var rows []an.Row
		if err := tx.NewRaw(q.SQL, store.BindArgs(q.Args)...).Scan(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	before := run(q)
	if len(before) < 3 {
		t.Fatalf("%d buckets for 3 hours", len(before))
	}
	for _, tier := range tiers.All {
		if _, err := tx.ExecContext(ctx, "UPDATE "+tier.Table+" SET sum = sum + 1000 WHERE variable_id = ?", s.VariableKey); err != nil {
			t.Fatal(err)
		}
	}
	if reflect.DeepEqual(run(q), before) {
		t.Fatal("the statement did not read the tiles made wrong")
	}
	if got := run(forced); !reflect.DeepEqual(got, before) {
		t.Errorf("with the zone check failing the statement still read tiles:\n got %s\nwant %s", rowsText(got), rowsText(before))
	}
}

func rowsText(rows []an.Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "(%d %v %v) ", r.Ord, *r.TS, *r.Value)
	}
	return b.String()
}

// TestExplainSaysWhichTiers: explain answers name the tiers a statement reads over
// which spans and why, and their psql form (what sensorapi compile prints) starts with
// the same notes as SQL comments.
func TestExplainSaysWhichTiers(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	s := env.Seed(t, c.Token, "explain-tiers", "v", []testenv.Point{{TS: 1767225600000, Value: 1}})
	week := map[string]any{"variables": []string{s.VariableID}, "aggregation": "max",
		"start": 1767225600000, "end": 1767225600000 + 7*86_400_000 - 1}
	for _, tc := range []struct {
		period, zone string
		want         []string
	}{
		{"1D", "Asia/Kathmandu", []string{"value_days tiles straddle local midnights", "value_quarters: whole tiles from 2026-01-01T00:00:00Z to 2026-01-08T00:00:00Z"}},
		{"1D", "UTC", []string{"UTC keeps local midnights on every tier's tile edges", "value_days: whole tiles from 2026-01-01T00:00:00Z to 2026-01-08T00:00:00Z"}},
		{"7T", "UTC", []string{"value_quarters tiles do not divide 7T buckets", "value_minutes: whole tiles"}},
	} {
		week["period"], week["tz"] = tc.period, tc.zone
		ans := c.Post("/api/v1.6/data/stats/resample/?explain=sql", week).Object(t)
		notes := fmt.Sprint(ans["tiers"])
		psql, _ := ans["psql"].(string)
		for _, w := range tc.want {
			if !strings.Contains(notes, w) || !strings.Contains(psql, "-- ") || !strings.Contains(psql[:strings.Index(psql, "WITH")], w) {
				t.Errorf("%s %s: notes %s, psql head %.300q: want %q", tc.period, tc.zone, notes, psql, w)
			}
		}
	}
}
