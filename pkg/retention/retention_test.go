package retention_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const day = 24 * time.Hour

// chunk is one chunk of a hypertable, from the catalog.
type chunk struct{ start, end time.Time }

func chunks(t *testing.T, table string) []chunk {
	t.Helper()
	rows, err := env.DB.Pool.Query(context.Background(), `SELECT range_start, range_end
		FROM timescaledb_information.chunks WHERE hypertable_name = $1 ORDER BY range_start`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []chunk
	for rows.Next() {
		var c chunk
		if err := rows.Scan(&c.start, &c.end); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// count runs a count(*) query.
func count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := env.DB.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestRetention: values every 10 minutes over three weeks (four chunks of "values")
// and their minute rollups; a raw retention that cuts at the end of the second chunk
// drops the first two chunks, and only them, keeps every minute rollup, records the
// chunk boundary as the horizon, runs once however many instances try, refuses writes
// before the horizon, and leaves the horizon alone when the rollups are trimmed later.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var points []testenv.Point
	for ts := t0; ts.Before(t0.Add(21 * day)); ts = ts.Add(10 * time.Minute) {
		points = append(points, testenv.Point{TS: ts.UnixMilli(), Value: float64(ts.Unix() % 1000)})
	}
	s := env.Seed(t, env.AdminToken, "retention-dev", "v", points)
	cs := chunks(t, "values")
	if len(cs) < 3 {
		t.Fatalf("%d chunks of values, want at least 3: %v", len(cs), cs)
	}
	e1, e2 := cs[0].end, cs[1].end // the cut: the end of the second chunk
	t.Logf("%d chunks of values, the first two ending at %s and %s", len(cs), e1.Format(time.RFC3339), e2.Format(time.RFC3339))
	const rawSQL = `SELECT count(*) FROM "values" WHERE variable_id = $1 AND ts < $2`
	const keptSQL = `SELECT count(*) FROM "values" WHERE variable_id = $1 AND ts >= $2`
	const minutesSQL = `SELECT count(*) FROM value_minutes WHERE variable_id = $1 AND tile < $2`
	const minutesAfterSQL = `SELECT count(*) FROM value_minutes WHERE variable_id = $1 AND tile >= $2`
	rawBefore, rawAfter := count(t, rawSQL, s.VariableKey, e2), count(t, keptSQL, s.VariableKey, e2)
	minutesBefore, minutesAfter := count(t, minutesSQL, s.VariableKey, e2), count(t, minutesAfterSQL, s.VariableKey, e2)
	if rawBefore == 0 || rawAfter == 0 || minutesBefore != rawBefore {
		t.Fatalf("seeded %d values before the cut and %d after, %d minutes before", rawBefore, rawAfter, minutesBefore)
	}
	if _, ok, err := retention.Horizon(ctx, env.DB.Pool); ok || err != nil {
		t.Fatalf("a horizon before any run: %v %v", ok, err)
	}

	c := env.Client(t).As(env.AdminToken)
	before := readAcross(t, c, s, t0, t0.Add(21*day))

	now := e2.Add(7*day + time.Hour)
	opts := retention.Options{Raw: 7 * day, Now: func() time.Time { return now }}

	// another instance holds the lock: this one skips, and nothing is dropped
	held, err := env.DB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `SELECT pg_advisory_lock($1)`, retention.LockKey); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	job := &retention.Job{Pool: env.DB.Pool, Options: opts, Metrics: m}
	res, err := job.Run(ctx)
	if err != nil || !res.Skipped || len(res.RawChunks) != 0 {
		t.Fatalf("run while the lock is held: %+v %v", res, err)
	}
	if n := count(t, rawSQL, s.VariableKey, e2); n != rawBefore {
		t.Fatalf("a skipped run removed values: %d of %d left", n, rawBefore)
	}
	if _, err := held.Exec(ctx, `SELECT pg_advisory_unlock($1)`, retention.LockKey); err != nil {
		t.Fatal(err)
	}
	held.Release()

	// several instances at once: the chunks are dropped and counted once in all
	var wg sync.WaitGroup
	results := make([]retention.Result, 4)
	errs := make([]error, len(results))
	for i := range results {
		wg.Go(func() {
			j := &retention.Job{Pool: env.DB.Pool, Options: opts, Metrics: m}
			results[i], errs[i] = j.Run(ctx)
		})
	}
	wg.Wait()
	var dropped []retention.Chunk
	var removed int64
	ran := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if !r.Skipped {
			ran++
		}
		dropped = append(dropped, r.RawChunks...)
		removed += r.RowsRemoved
	}
	if ran == 0 || len(dropped) != 2 || removed != rawBefore {
		t.Fatalf("%d runs ran, dropping %d chunks (want 2) and %d rows (want %d): %+v", ran, len(dropped), removed,
			rawBefore, results)
	}
	for _, c := range dropped {
		if c.End.After(e2) || !c.End.Equal(e1) && !c.End.Equal(e2) {
			t.Fatalf("dropped %+v, want the chunks ending at %s and %s", c, e1, e2)
		}
	}
	t.Logf("%d of %d concurrent runs ran (the others skipped or found nothing)", ran, len(results))

	if n := count(t, rawSQL, s.VariableKey, e2); n != 0 {
		t.Fatalf("%d raw values before the horizon are left", n)
	}
	if n := count(t, keptSQL, s.VariableKey, e2); n != rawAfter {
		t.Fatalf("%d raw values from the horizon on, want %d", n, rawAfter)
	}
	if n := count(t, minutesSQL, s.VariableKey, e2); n != minutesBefore {
		t.Fatalf("%d minute rollups before the horizon, want all %d", n, minutesBefore)
	}
	// a new instance: the first one keeps the horizon it read (none) for HorizonTTL
	checkReadsAcross(t, env.Client(t).As(env.AdminToken), s, before, t0, e2)
	if n := count(t, minutesAfterSQL, s.VariableKey, e2); n != minutesAfter {
		t.Fatalf("%d minute rollups after the horizon, want %d", n, minutesAfter)
	}
	h, ok, err := retention.Horizon(ctx, env.DB.Pool)
	if err != nil || !ok || !h.Equal(e2) {
		t.Fatalf("horizon %s %v %v, want the chunk boundary %s", h, ok, err, e2)
	}
	if n := count(t, `SELECT rows_removed FROM retention_state`); n != rawBefore {
		t.Fatalf("retention_state.rows_removed = %d, want %d", n, rawBefore)
	}
	if got := testutil.ToFloat64(m.RetentionHorizon); got != float64(e2.Unix()) {
		t.Fatalf("horizon gauge %v, want %d", got, e2.Unix())
	}
	if got := testutil.ToFloat64(m.RetentionRowsRemoved); got != float64(rawBefore) {
		t.Fatalf("rows removed counter %v, want %d", got, rawBefore)
	}
	if got := testutil.ToFloat64(m.RetentionChunksDropped.WithLabelValues("values")); got != 2 {
		t.Fatalf("chunks dropped counter %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.RetentionRuns.WithLabelValues("skipped")); got < 1 {
		t.Fatalf("skipped runs counter %v", got)
	}

	writesBeforeHorizon(t, e2)

	// the rollups kept a week longer: the first chunk of value_minutes goes, the second
	// stays; every tier is trimmed; the horizon stays
	opts.Rollups = 14 * day
	res, err = retention.Run(ctx, env.DB.Pool, opts)
	if err != nil || res.Skipped || len(res.RawChunks) != 0 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	byTable := map[string]retention.Tier{}
	for _, tr := range res.Tiers {
		byTable[tr.Table] = tr
	}
	if tr := byTable["value_minutes"]; tr.Chunks != 1 {
		t.Fatalf("value_minutes: %+v, want its first chunk dropped (%+v)", tr, res.Tiers)
	}
	if len(res.Tiers) != len(tiers.All) {
		t.Fatalf("tiers %+v, want one per %v", res.Tiers, tiers.All)
	}
	if n := count(t, minutesSQL, s.VariableKey, e1); n != 0 {
		t.Fatalf("%d minute rollups left before %s", n, e1)
	}
	if n := count(t, `SELECT count(*) FROM value_minutes WHERE variable_id = $1 AND tile >= $2 AND tile < $3`,
		s.VariableKey, e1, e2); n != count(t, `SELECT count(*) FROM generate_series($1::timestamptz, $2::timestamptz - interval '10 minutes', interval '10 minutes')`, e1, e2) {
		t.Fatalf("%d minute rollups in the second chunk: some were dropped", n)
	}
	if h2, ok, _ := retention.Horizon(ctx, env.DB.Pool); !ok || !h2.Equal(e2) || !res.Horizon.Equal(e2) {
		t.Fatalf("horizon after trimming the rollups: %s, want %s", h2, e2)
	}
}

// writesBeforeHorizon: a dot older than the horizon is refused with 400 naming
// "timestamp" (the whole message: nothing is written), from every write route; one at
// the horizon is accepted.
func writesBeforeHorizon(t *testing.T, horizon time.Time) {
	t.Helper()
	c := env.Client(t)
	before, at := horizon.Add(-time.Hour).UnixMilli(), horizon.UnixMilli()
	r := c.Post("/api/v1.6/devices/retention-writer/", map[string]any{
		"t": []map[string]any{{"value": 1, "timestamp": at}, {"value": 2, "timestamp": before}},
	})
	if r.Status != 400 || !strings.Contains(string(r.Body), `"timestamp"`) ||
		!strings.Contains(string(r.Body), fmt.Sprint(at)) {
		t.Fatalf("a dot before the horizon: %d %s", r.Status, r.Body)
	}
	if n := count(t, `SELECT count(*) FROM "values" v JOIN variables x ON x.id = v.variable_id
		JOIN devices d ON d.id = x.device_id WHERE d.label = 'retention-writer'`); n != 0 {
		t.Fatalf("a refused message wrote %d values", n)
	}
	if r := c.Post("/api/v1.6/devices/retention-writer/?timestamp="+fmt.Sprint(before), map[string]any{"t": 1}); r.Status != 400 ||
		!strings.Contains(string(r.Body), `"timestamp"`) {
		t.Fatalf("?timestamp before the horizon: %d %s", r.Status, r.Body)
	}
	if r := c.Post("/api/v1.6/devices/retention-writer/", map[string]any{"t": map[string]any{"value": 1, "timestamp": at}}); r.Status != 200 {
		t.Fatalf("a dot at the horizon: %d %s", r.Status, r.Body)
	}
	if r := c.Post("/api/v1.6/devices/retention-writer/t/values", map[string]any{"value": 1, "timestamp": before}); r.Status != 400 ||
		!strings.Contains(string(r.Body), `"timestamp"`) {
		t.Fatalf("values route, a dot before the horizon: %d %s", r.Status, r.Body)
	}
}
