package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// parityFixture is testdata/parity/fixtures.json, written by gen.py with pandas.
type parityFixture struct {
	Points      map[string][][2]json.Number `json:"points"`
	Resample    []parityCase                `json:"resample"`
	Aggregation []parityCase                `json:"aggregation"`
	TZ          tzRecord                    `json:"tz"`
}

type parityCase struct {
	Name     string          `json:"name"`
	Body     map[string]any  `json:"body"`
	Expected json.RawMessage `json:"expected"`
}

// TestResampleParity replays every pandas case of gen.py against the real endpoints on
// the real database: timestamps must match exactly, values within 1e-9 relative.
// fixtures.json holds the cases; sweep.json the day and week labels of every common
// zone (gen.py lists the few where pandas itself raises). Cases whose zone has other tz
// rules in the database than in the fixture are skipped (see tzRules).
func TestResampleParity(t *testing.T) {
	t.Parallel() // its own account, read-only once seeded
	fx := loadParity(t, "fixtures.json")
	sweep := loadParity(t, "sweep.json")
	c := env.Client(t).As(env.NewAccount(t))
	ids := seedParity(t, c.Token, fx.Points)
	fxDiffer, sweepDiffer := tzRules(t, "fixtures.json", fx.TZ), tzRules(t, "sweep.json", sweep.TZ)
	logTzRules(t, "fixtures.json", fx.TZ, fxDiffer)
	logTzRules(t, "sweep.json", sweep.TZ, sweepDiffer)
	run := func(t *testing.T, path string, cases []parityCase, period bool, rec tzRecord, differ map[string]*tzDisagreement) {
		if len(cases) == 0 {
			t.Fatal("no cases")
		}
		for _, pc := range cases {
			t.Run(pc.Name, func(t *testing.T) {
				c := parallelCase(t, c)
				if why, ok := sweepDeviations[pc.Name]; ok {
					t.Skip(why)
				}
				if why := tzRulesDiffer(t, pc, rec, differ); why != "" {
					t.Skip(why)
				}
				body, want := withIDs(pc.Body, ids)
				r := c.Post(path, body)
				if r.Status != 200 {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				var got struct {
					Results json.RawMessage `json:"results"`
					Columns any             `json:"columns"`
				}
				if err := json.Unmarshal(r.Body, &got); err != nil {
					t.Fatal(err)
				}
				if err := sameResults(testenv.DecodeNumbers(t, pc.Expected), testenv.DecodeNumbers(t, got.Results)); err != nil {
					t.Fatalf("%v\nbody %v\n got %s\nwant %s", err, body, got.Results, pc.Expected)
				}
				if cols := columnsFor(want, body["join_dataframes"] == true, period); !reflect.DeepEqual(got.Columns, cols) {
					t.Fatalf("columns %v, want %v", got.Columns, cols)
				}
			})
		}
	}
	t.Run("resample", func(t *testing.T) { run(t, resamplePath, fx.Resample, true, fx.TZ, fxDiffer) })
	t.Run("aggregation", func(t *testing.T) { run(t, aggregationPath, fx.Aggregation, false, fx.TZ, fxDiffer) })
	t.Run("zones", func(t *testing.T) { run(t, resamplePath, sweep.Resample, true, sweep.TZ, sweepDiffer) })
}

// parallelCase runs a fixture case beside the others and returns the client reporting
// to it. A suite's cases only read the account it seeded, and each mostly waits for the
// database (planning its statement and running it), so -parallel of them at a time take
// a fraction of the time one after the other did.
func parallelCase(t *testing.T, c *testenv.Client) *testenv.Client {
	t.Parallel()
	return c.In(t)
}

// sweepDeviations are zone sweep cases where the service is right and pandas 1.5 is
// not. (Cases whose zone changed its rules after the generator's tzdata are found by
// tzRulesDiffer instead.)
var sweepDeviations = map[string]string{
	"Atlantic/Azores D a": "pandas 1.5 shifts the missing midnight of 29 March to 02:00 instead of 01:00 " +
		"(nonexistent='shift_forward' into a UTC+0 offset) and bins by it",
}

// The tz rules of the fixtures and of the database.
//
// gen.py computes the expected answers with the host's tzdata and records, in each
// fixture file's "tz", its version and every case zone's UTC offsets over a span that
// covers all cases. The database image is built from Debian's current tzdata, and zones
// keep changing their rules for dates the fixtures cover (2026f: British Columbia,
// Alberta, Inuvik, Manitoba and Cuba stay on summer time; Morocco). So before comparing, the
// test asks the database for each zone's offsets over the span; a case whose zone
// disagrees anywhere in its range (from a month before its first label, which a W or M
// bucket and the origin can reach, to a week after its last) is skipped, naming
// the zone, the instant and both offsets, and the disagreement is logged once at the
// top. Every other case, including every case of the same zone outside the
// disagreement, is compared exactly as before.
//
// Skipping rather than failing is deliberate: CI builds the image fresh every run, so a
// tzdata release would otherwise block every landing until someone regenerates, and
// the answer to such a case is unknown (pandas would have to be rerun), not wrong. The
// fix is always the same: update the host's tzdata and rerun gen.py (docs/queries.md).

// tzRecord is a fixture's "tz": what gen.py's pandas used.
type tzRecord struct {
	Tzdata  string                `json:"tzdata"`
	Span    [2]int64              `json:"span"`
	Offsets map[string][][2]int64 `json:"offsets"` // zone: [from ms, UTC offset in s], first at Span[0]
}

// tzProbeStep is how far apart the database's offsets are sampled, besides the instant of
// every recorded change and the millisecond before it (so a moved or dropped change is
// seen to the millisecond). An added change is seen unless its offset lasts under 6 hours.
const tzProbeStep = 6 * 3600 * 1000

// tzDisagreement is where the database's rules for a zone differ from the fixture's.
type tzDisagreement struct {
	ts          []int64 // probes where the offsets differ, ascending
	fixture, db []int   // the offsets there, in seconds
}

// tzRules compares rec with the database's rules and returns the zones that disagree.
func tzRules(t *testing.T, name string, rec tzRecord) map[string]*tzDisagreement {
	t.Helper()
	if rec.Tzdata == "" || len(rec.Offsets) == 0 || rec.Span[0] >= rec.Span[1] {
		t.Fatalf("%s has no tz record (tzdata version, offsets per zone); regenerate it with gen.py", name)
	}
	var zones, probeZones []string
	var probes []int64
	for zone, offs := range rec.Offsets {
		if len(offs) == 0 || offs[0][0] != rec.Span[0] {
			t.Fatalf("%s: tz record of %s does not start at the span's start", name, zone)
		}
		zones = append(zones, zone)
		for _, o := range offs[1:] {
			probeZones = append(probeZones, zone, zone)
			probes = append(probes, o[0]-1, o[0])
		}
	}
	// the database's offset at every probe; only the probes where it changes come back.
	// The sweep's 400 zones make ~700k probes: seconds alone, but past the pool's 30 s
	// statement_timeout on a loaded machine, so this test query runs without one.
	ctx := context.Background()
	tx, err := env.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `WITH p(zone, ts) AS (
			SELECT z, g FROM unnest($1::text[]) z, generate_series($2::bigint, $3::bigint, $4::bigint) g
			UNION SELECT * FROM unnest($5::text[], $6::bigint[])
		), o AS (
			SELECT zone, ts, extract(epoch FROM (to_timestamp(ts / 1000.0) AT TIME ZONE zone)
				- (to_timestamp(ts / 1000.0) AT TIME ZONE 'UTC'))::int AS off FROM p
		)
		SELECT zone, ts, off FROM (SELECT *, lag(off) OVER (PARTITION BY zone ORDER BY ts) AS prev FROM o) x
		WHERE prev IS DISTINCT FROM off ORDER BY zone, ts`,
		zones, rec.Span[0], rec.Span[1], int64(tzProbeStep), probeZones, probes)
	if err != nil {
		t.Fatal(err)
	}
	db := map[string][][2]int64{}
	for rows.Next() {
		var zone string
		var ts int64
		var off int
		if err := rows.Scan(&zone, &ts, &off); err != nil {
			t.Fatal(err)
		}
		db[zone] = append(db[zone], [2]int64{ts, int64(off)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]*tzDisagreement{}
	for _, zone := range zones {
		var ts []int64
		for p := rec.Span[0]; p <= rec.Span[1]; p += tzProbeStep {
			ts = append(ts, p)
		}
		for _, o := range rec.Offsets[zone][1:] {
			ts = append(ts, o[0]-1, o[0])
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		for _, p := range ts {
			want, got := offsetAt(rec.Offsets[zone], p), offsetAt(db[zone], p)
			if want == got {
				continue
			}
			d := out[zone]
			if d == nil {
				d = &tzDisagreement{}
				out[zone] = d
			}
			d.ts, d.fixture, d.db = append(d.ts, p), append(d.fixture, int(want)), append(d.db, int(got))
		}
	}
	return out
}

// offsetAt is the offset of the last change at or before ts (math.MinInt64 if none).
func offsetAt(changes [][2]int64, ts int64) int64 {
	i := sort.Search(len(changes), func(i int) bool { return changes[i][0] > ts })
	if i == 0 {
		return math.MinInt64
	}
	return changes[i-1][1]
}

// tzRulesDiffer tells why a resample case cannot be compared: its zone's rules in the
// database differ from the fixture's somewhere in its range; "" when they agree.
func tzRulesDiffer(t *testing.T, pc parityCase, rec tzRecord, differ map[string]*tzDisagreement) string {
	t.Helper()
	if _, ok := pc.Body["period"]; !ok {
		return "" // aggregation (E9) has no buckets: its tz does not matter
	}
	tz, _ := pc.Body["tz"].(string)
	if tz == "" {
		tz = "UTC"
	}
	if _, ok := rec.Offsets[tz]; !ok {
		t.Fatalf("the fixture's tz record has no offsets for %s; regenerate it with gen.py", tz)
	}
	// The zone matters from the origin (local midnight before the first value) to the
	// end of the last bucket: labels are bucket starts (T, H, nD) or ends (W, M), so
	// every value and edge is within a month before the first label and a few days
	// after the last one. An empty answer does not depend on the zone.
	var labels []int64
	collectLabels(testenv.DecodeNumbers(t, pc.Expected), &labels)
	if len(labels) == 0 {
		return ""
	}
	const day = 24 * 3600 * 1000
	lo, hi := labels[0], labels[0]
	for _, l := range labels {
		lo, hi = min(lo, l), max(hi, l)
	}
	lo, hi = lo-32*day, hi+7*day
	if lo < rec.Span[0] || hi > rec.Span[1] {
		t.Fatalf("case range %d..%d is outside the fixture's tz span %v; widen TZ_SPAN in gen.py", lo, hi, rec.Span)
	}
	d := differ[tz]
	if d == nil {
		return ""
	}
	// a disagreement anywhere within a probe step of the range (the probes are that far apart)
	i := sort.Search(len(d.ts), func(i int) bool { return d.ts[i] >= lo-tzProbeStep })
	if i == len(d.ts) || d.ts[i] > hi+tzProbeStep {
		return ""
	}
	return fmt.Sprintf("fixtures were generated with tzdata %s whose rules for %s differ from the database's "+
		"(at %s: UTC%s in the fixture, UTC%s in the database); regenerate with gen.py",
		rec.Tzdata, tz, time.UnixMilli(d.ts[i]).UTC().Format(time.RFC3339), utcOffset(d.fixture[i]), utcOffset(d.db[i]))
}

// logTzRules logs, once per fixture file, every zone whose rules disagree.
func logTzRules(t *testing.T, name string, rec tzRecord, differ map[string]*tzDisagreement) {
	t.Helper()
	zones := make([]string, 0, len(differ))
	for z := range differ {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		d := differ[z]
		t.Logf("%s: fixtures were generated with tzdata %s whose rules for %s differ from the database's "+
			"from %s (UTC%s in the fixture, UTC%s in the database): the cases of %s over that time are skipped; "+
			"regenerate with gen.py", name, rec.Tzdata, z, time.UnixMilli(d.ts[0]).UTC().Format(time.RFC3339),
			utcOffset(d.fixture[0]), utcOffset(d.db[0]), z)
	}
}

func utcOffset(s int) string {
	sign := "+"
	if s < 0 {
		sign, s = "-", -s
	}
	return fmt.Sprintf("%s%02d:%02d", sign, s/3600, s%3600/60)
}

// collectLabels appends the timestamp of each innermost row ([ts, v] or [ts, v1, ...]).
func collectLabels(v any, out *[]int64) {
	rows, ok := v.([]any)
	if !ok || len(rows) == 0 {
		return
	}
	if n, ok := rows[0].(json.Number); ok {
		if ts, err := n.Int64(); err == nil {
			*out = append(*out, ts)
		}
		return
	}
	for _, r := range rows {
		collectLabels(r, out)
	}
}

func loadParity(t *testing.T, name string) parityFixture {
	t.Helper()
	var fx parityFixture
	loadFixture(t, "testdata/parity/"+name, &fx)
	return fx
}

// loadFixture decodes the JSON file at path into v.
func loadFixture(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// seedParity stores each fixture variable (in its own account, so no other test's data
// can leak in) and returns its public id by name.
func seedParity(t *testing.T, token string, points map[string][][2]json.Number) map[string]string {
	t.Helper()
	names := make([]string, 0, len(points))
	for n := range points {
		names = append(names, n)
	}
	sort.Strings(names)
	ids := map[string]string{}
	for _, n := range names {
		pts := make([]testenv.Point, len(points[n]))
		for i, p := range points[n] {
			ts, err1 := p[0].Int64()
			v, err2 := p[1].Float64()
			if err1 != nil || err2 != nil {
				t.Fatalf("point %s.%d: %v %v", n, i, err1, err2)
			}
			pts[i] = testenv.Point{TS: ts, Value: v}
		}
		ids[n] = env.Seed(t, token, "parity", n, pts).VariableID
	}
	return ids
}

// withIDs replaces variable names by their ids; it returns the body and the ids.
func withIDs(body map[string]any, ids map[string]string) (map[string]any, []string) {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	var vars []string
	for _, n := range body["variables"].([]any) {
		vars = append(vars, ids[n.(string)])
	}
	out["variables"] = vars
	return out, vars
}

func columnsFor(ids []string, join, period bool) any {
	if join && !period {
		return []any{"timestamp", "value.value"}
	}
	cols := []any{}
	if join {
		cols = append(cols, "timestamp")
		for _, id := range ids {
			cols = append(cols, id+".value.value")
		}
		return cols
	}
	for range ids {
		cols = append(cols, []any{"timestamp", "value.value"})
	}
	return cols
}

// sameResults compares nested arrays. In the innermost arrays ([ts, v] pairs or joined
// rows [ts, v1, v2, ...]) the first element is a timestamp and must be equal; the
// others are values, null or within 1e-9 relative.
func sameResults(want, got any) error {
	w, okW := want.([]any)
	g, okG := got.([]any)
	if !okW || !okG {
		return fmt.Errorf("not arrays: want %v, got %v", want, got)
	}
	if len(w) != len(g) {
		return fmt.Errorf("length %d, want %d", len(g), len(w))
	}
	for i := range w {
		if _, nested := w[i].([]any); nested {
			if err := sameResults(w[i], g[i]); err != nil {
				return fmt.Errorf("[%d]%w", i, err)
			}
			continue
		}
		if err := testenv.SameScalar(w[i], g[i], i == 0); err != nil {
			return fmt.Errorf("[%d]: %w (row %v, want %v)", i, err, g, w)
		}
	}
	return nil
}
