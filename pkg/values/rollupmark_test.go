package values_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
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

// TestTilesFollowTheMark: values after a variable's rollups_until reach no tile; CatchUp
// builds the minutes from the values, the quarters and the days that end by the new mark
// from the tier below, moves the mark, and every tile before it is then exact; a late
// value before the mark is added to the tiles at once; writers racing with CatchUp leave
// every tile before the mark exact; E7 answers equal the raw values' before and after
// each step; the packer leaves a day past the mark alone (its values build its tiles).
func TestTilesFollowTheMark(t *testing.T) {
	scope := env.NewDriftScope(t)
	ctx := context.Background()
	c := env.Client(t).As(env.NewAccount(t))
	st := &values.Store{Pool: env.DB.Pool}
	post := func(batch []any) {
		t.Helper()
		if r := c.Post("/api/v1.6/devices/marked/t/values", batch); r.Status != 201 {
			t.Fatalf("post: %d %s", r.Status, r.Body)
		}
	}
	post([]any{map[string]any{"value": 1, "timestamp": int64(1_700_000_000_000)}}) // creates the variable
	v := &testenv.Var{ID: c.VariableID("marked", "t")}
	var mark time.Time
	if err := env.DB.Pool.QueryRow(ctx, `SELECT id, rollups_until FROM variables WHERE public_id = $1`, v.ID).Scan(&v.Key, &mark); err != nil {
		t.Fatal(err)
	}
	if mark.UnixMilli()%60_000 != 0 || time.Since(mark) < 0 || time.Since(mark) > 2*time.Minute {
		t.Fatalf("a new variable's mark %s: want the current minute", mark)
	}
	vars := map[string]*testenv.Var{"t": v}
	m0 := mark.UnixMilli()
	day := int64(86_400_000)
	// a dot a minute (and a few seconds) from 2 h before the mark to 54 h after it
	var batch []any
	for ts := m0 - 2*3600_000; ts < m0+54*3600_000; ts += 60_000 + int64(len(batch)%7)*1000 {
		batch = append(batch, map[string]any{"value": float64(len(batch)%97) - 40.5, "timestamp": ts})
	}
	post(batch)

	// tilesPast counts the variable's tiles that end after its mark (every instance's
	// CatchUpLoop may move it meanwhile: read with the tiles)
	tilesPast := func() int {
		t.Helper()
		var n int
		if err := env.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM value_minutes m WHERE m.variable_id = v.id AND m.tile + INTERVAL '1 minute' > v.rollups_until)
			+ (SELECT count(*) FROM value_quarters m WHERE m.variable_id = v.id AND m.tile + INTERVAL '15 minutes' > v.rollups_until)
			+ (SELECT count(*) FROM value_days m WHERE m.variable_id = v.id AND m.tile + INTERVAL '1 day' > v.rollups_until)
			FROM variables v WHERE v.id = $1`, v.Key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(step string) {
		t.Helper()
		if drift, _ := env.RollupDrift(t, scope); drift != 0 {
			t.Fatalf("after %s: %d tiles differ from the values", step, drift)
		}
		for _, r := range [][2]int64{{m0 - 90*60_000 + 123, m0 + 53*3600_000 - 7}, {m0 - 7*60_000, m0 + 31*60_000 + 5}, {m0 + 10*60_000, m0 + 3*day}} {
			want := env.RefStatistics(t, vars, []string{"t"}, r[0], r[1])
			got := testenv.PostStatistics(t, c, vars, []string{"t"}, r[0], r[1], testenv.SummaryAggs)
			testenv.CheckStatistics(t, fmt.Sprintf("%s: E7 over [%d, %d]", step, r[0], r[1]), want, got, testenv.SummaryAggs)
		}
	}
	if n := tilesPast(); n != 0 {
		t.Fatalf("%d tiles past the mark: the write path should leave them to CatchUp", n)
	}
	check("fresh values")

	// the day holding the mark and the next end by until: CatchUp builds them, and the
	// minutes and quarters up to until
	// (CatchUp skips a variable another run holds, and every instance's CatchUpLoop
	// takes this one once a minute has passed since its mark: until the next call)
	until := time.UnixMilli(m0/day*day + 50*3600_000).UTC()
	testenv.Eventually(t, fmt.Sprintf("CatchUp moves the mark to %s", until), func() bool {
		if _, err := st.CatchUp(ctx, until); err != nil {
			t.Fatal(err)
		}
		if err := env.DB.Pool.QueryRow(ctx, `SELECT rollups_until FROM variables WHERE id = $1`, v.Key).Scan(&mark); err != nil {
			t.Fatal(err)
		}
		return mark.Equal(until)
	})
	var minutes, quarters, days int
	if err := env.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM value_minutes WHERE variable_id = $1 AND tile >= $2 AND tile < $3),
		(SELECT count(*) FROM value_quarters WHERE variable_id = $1 AND tile >= $2 AND tile < $3),
		(SELECT count(*) FROM value_days WHERE variable_id = $1 AND tile >= $2 AND tile < $3)`,
		v.Key, time.UnixMilli(m0/day*day).UTC(), until).Scan(&minutes, &quarters, &days); err != nil {
		t.Fatal(err)
	}
	busy := [3]map[int64]bool{{}, {}, {}} // the minutes, quarters and days holding a dot
	for _, d := range batch {
		if ts := d.(map[string]any)["timestamp"].(int64); ts >= m0/day*day && ts < until.UnixMilli() {
			busy[0][ts/60_000], busy[1][ts/900_000] = true, true
			if (ts/day+1)*day <= until.UnixMilli() { // the day holding until is not built yet
				busy[2][ts/day] = true
			}
		}
	}
	if minutes != len(busy[0]) || quarters != len(busy[1]) || days != len(busy[2]) || days != 2 {
		t.Fatalf("%d minutes, %d quarters and %d days from the day holding the mark to the new one, want %d, %d and %d (2)",
			minutes, quarters, days, len(busy[0]), len(busy[1]), len(busy[2]))
	}
	if n := tilesPast(); n != 0 {
		t.Fatalf("%d tiles past the new mark", n)
	}
	check("CatchUp")
	c.Server.Rollups.Forget()
	explain := c.Post("/api/v2.0/data/statistics/?explain=sql", map[string]any{"start": m0 - 90*60_000, "end": m0 + 53*3600_000,
		"variables": []any{map[string]any{"variable": v.ID}}, "aggregations": []string{"mean"}}).Object(t)
	if notes := fmt.Sprint(explain["tiers"]); !strings.Contains(notes, "value_days") {
		t.Fatalf("a range holding a day before the mark reads no day tile: %s", notes)
	}

	// a late value into a quarter before the mark, another after it
	post([]any{map[string]any{"value": 1e4, "timestamp": m0 + 10*60_000 + 1}, map[string]any{"value": -1e4, "timestamp": until.UnixMilli() + 1}})
	check("late values")

	// writers around the mark while it moves three quarters on
	rng := rand.New(rand.NewPCG(3, 3))
	var wg sync.WaitGroup
	for w := range 4 {
		seeds := make([]int64, 30)
		for i := range seeds {
			seeds[i] = until.UnixMilli() - 3600_000 + rng.Int64N(2*3600_000)
		}
		wg.Go(func() {
			for i := 0; i < len(seeds); i += 3 {
				b := []any{}
				for _, ts := range seeds[i : i+3] {
					b = append(b, map[string]any{"value": float64(w*100 + i), "timestamp": ts})
				}
				if r := c.Post("/api/v1.6/devices/marked/t/values", b); r.Status != 201 {
					t.Errorf("writer %d: %d %s", w, r.Status, r.Body)
				}
			}
		})
	}
	for q := 1; q <= 3; q++ {
		if _, err := st.CatchUp(ctx, until.Add(time.Duration(q)*15*time.Minute)); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
	if _, err := st.CatchUp(ctx, until.Add(45*time.Minute)); err != nil { // those a writer held
		t.Fatal(err)
	}
	check("writers racing with CatchUp")

	// the day holding the mark cannot be packed: its values build its tiles
	packDay := until.Truncate(24 * time.Hour)
	if n, err := st.PackDay(ctx, v.Key, packDay); err != nil || n != 0 {
		t.Fatalf("packed %d values of the day holding the mark (%v)", n, err)
	}
	if n, err := st.PackDay(ctx, v.Key, packDay.Add(-24*time.Hour)); err != nil || n == 0 {
		t.Fatalf("packed %d values of the day before the mark's (%v)", n, err)
	}
	rows := testenv.RefValues
	testenv.RefValues = testenv.PackedRefValues
	defer func() { testenv.RefValues = rows }()
	check("packing")
}
