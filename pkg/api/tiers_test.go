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
	"testing"
	"time"

	an "github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/querybuilder"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestSummariesMatchRawValues: answers read from minute rollups plus raw values at the
// ends equal answers computed here from the values themselves, for ranges whose ends
// fall inside minutes, inside one minute, and across 1973-01-01.
func TestSummariesMatchRawValues(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	pts := testenv.DenseAcrossEpoch(3000) // about 3 hours
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
	pts := testenv.DenseAcrossEpoch(3000)
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
			if err := sameResults(testenv.DecodeNumbers(t, want), testenv.DecodeNumbers(t, got.Results)); err != nil {
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
