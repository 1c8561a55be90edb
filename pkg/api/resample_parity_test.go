package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/testenv"
)

// parityFixture is testdata/parity/fixtures.json, written by gen.py with pandas.
type parityFixture struct {
	Points      map[string][][2]json.Number `json:"points"`
	Resample    []parityCase                `json:"resample"`
	Aggregation []parityCase                `json:"aggregation"`
}

type parityCase struct {
	Name     string          `json:"name"`
	Body     map[string]any  `json:"body"`
	Expected json.RawMessage `json:"expected"`
}

// TestResampleParity replays every pandas case of gen.py against the real endpoints on
// the real database: timestamps must match exactly, values within 1e-9 relative.
// fixtures.json holds the cases; sweep.json the day and week labels of every common
// zone (gen.py lists the few where pandas itself raises).
func TestResampleParity(t *testing.T) {
	fx := loadParity(t, "fixtures.json")
	sweep := loadParity(t, "sweep.json")
	c := env.Client(t).As(env.NewAccount(t))
	ids := seedParity(t, c.Token, fx.Points)
	run := func(t *testing.T, path string, cases []parityCase, period bool) {
		if len(cases) == 0 {
			t.Fatal("no cases")
		}
		for _, pc := range cases {
			t.Run(pc.Name, func(t *testing.T) {
				if why, ok := sweepDeviations[pc.Name]; ok {
					t.Skip(why)
				}
				if why := tzRulesDiffer(t, pc); why != "" {
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
				if err := sameResults(decodeNumbers(t, pc.Expected), decodeNumbers(t, got.Results)); err != nil {
					t.Fatalf("%v\nbody %v\n got %s\nwant %s", err, body, got.Results, pc.Expected)
				}
				if cols := columnsFor(want, body["join_dataframes"] == true, period); !reflect.DeepEqual(got.Columns, cols) {
					t.Fatalf("columns %v, want %v", got.Columns, cols)
				}
			})
		}
	}
	t.Run("resample", func(t *testing.T) { run(t, resamplePath, fx.Resample, true) })
	t.Run("aggregation", func(t *testing.T) { run(t, aggregationPath, fx.Aggregation, false) })
	t.Run("zones", func(t *testing.T) { run(t, resamplePath, sweep.Resample, true) })
}

// sweepDeviations are zone sweep cases where the service is right and pandas 1.5 is
// not. (Cases whose zone changed its rules after the generator's tzdata are found by
// tzRulesDiffer instead.)
var sweepDeviations = map[string]string{
	"Atlantic/Azores D a": "pandas 1.5 shifts the missing midnight of 29 March to 02:00 instead of 01:00 " +
		"(nonexistent='shift_forward' into a UTC+0 offset) and bins by it",
}

// tzRulesDiffer tells why a calendar case (nD, W, M) cannot be compared: the fixture was
// made with the generator's tzdata (2025b), the database image is built from Debian's
// current one, and zones keep changing their rules for dates the fixture covers
// (tzdata 2026: British Columbia, Alberta, Manitoba and others keep summer time; Morocco,
// Cuba). Every label of a calendar bucket is the start of a local day; where one is not
// under the database's rules, the two tzdata releases disagree there and the case is
// skipped, naming the label, rather than failing on every tzdata release.
func tzRulesDiffer(t *testing.T, pc parityCase) string {
	t.Helper()
	period, _ := pc.Body["period"].(string)
	tz, _ := pc.Body["tz"].(string)
	calendar := strings.HasSuffix(period, "D") || period == "W" || period == "M"
	if tz == "" || tz == "UTC" || !calendar {
		return ""
	}
	var labels []int64
	collectLabels(decodeNumbers(t, pc.Expected), &labels)
	var bad *int64
	var local string
	// a day starts at the label when the millisecond before it is on another local date
	// (at 01:00 where summer time begins at midnight)
	err := env.DB.Pool.QueryRow(context.Background(), `SELECT ts, (to_timestamp(ts / 1000.0) AT TIME ZONE $2)::text
		FROM unnest($1::bigint[]) AS ts
		WHERE (to_timestamp(ts / 1000.0) AT TIME ZONE $2)::date = (to_timestamp((ts - 1) / 1000.0) AT TIME ZONE $2)::date
		LIMIT 1`, labels, tz).Scan(&bad, &local)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("the database's tzdata disagrees with the fixture's for %s: label %d is %s local, not the "+
		"start of a day (regenerate with gen.py against matching tzdata)", tz, *bad, local)
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
	raw, err := os.ReadFile("testdata/parity/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var fx parityFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fx
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

func decodeNumbers(t *testing.T, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
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
		if err := sameScalar(w[i], g[i], i == 0); err != nil {
			return fmt.Errorf("[%d]: %w (row %v, want %v)", i, err, g, w)
		}
	}
	return nil
}

func sameScalar(want, got any, exact bool) error {
	if want == nil || got == nil {
		if want != got {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		return nil
	}
	wn, okW := want.(json.Number)
	gn, okG := got.(json.Number)
	if !okW || !okG {
		return fmt.Errorf("got %v, want %v", got, want)
	}
	if exact {
		wi, err1 := wn.Int64()
		gi, err2 := gn.Int64()
		if err1 != nil || err2 != nil || wi != gi {
			return fmt.Errorf("timestamp %s, want %s", gn, wn)
		}
		return nil
	}
	wf, _ := wn.Float64()
	gf, _ := gn.Float64()
	if math.Abs(wf-gf) > 1e-9*math.Max(math.Abs(wf), math.Abs(gf)) {
		return fmt.Errorf("value %s, want %s", gn, wn)
	}
	return nil
}
