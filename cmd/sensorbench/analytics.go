package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// Each figure is the median of at least queryRuns runs after one warm-up; fast queries
// run more often (measurePair).
const (
	queryRuns = 5
	maxRuns   = 41
	pairTime  = 10 * time.Second
)

// series is the analytics data set: one variable of a year at 3-second spacing.
type series struct {
	account          int64
	token            string
	device, variable string // labels
	variableID       string // public id
	start, end       time.Time
	points           int
}

// loadSeries writes the year through values.Store in-process (the HTTP path is measured
// by the ingestion benchmark; here only the data matters).
func loadSeries(ctx context.Context, h *benchharness.Harness, points int) (series, error) {
	acct, tok, err := h.NewAccount(ctx, "analytics")
	if err != nil {
		return series{}, err
	}
	spec := loadgen.Spec{Devices: 1, Variables: 1, Points: points, Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Interval: 3 * time.Second, Seed: 2, Batch: 20000}
	s := series{account: acct, token: tok, device: loadgen.DeviceLabel(0), variable: loadgen.VariableLabel(0), start: spec.Start,
		end: spec.Start.Add(time.Duration(points-1) * spec.Interval), points: points}
	st := ingest.Direct(&values.Store{Pool: h.DB.Pool})
	fmt.Printf("loading %d points into one variable (a year at 3 s)...\n", points)
	t0 := time.Now()
	if _, err := timeLoad(spec, func(b loadgen.Batch) error { return st.ToDevice(ctx, acct, b.Device, b.Dots) }); err != nil {
		return s, err
	}
	fmt.Printf("  loaded in %.0fs\n", time.Since(t0).Seconds())
	if _, err := h.DB.ExecContext(ctx, `VACUUM ANALYZE "values", value_minutes`); err != nil {
		return s, err
	}
	var bytes, rows, rollupBytes, rollups int64
	if err := h.DB.NewRaw(`SELECT hypertable_size('values'), (SELECT count(*) FROM "values"),
		hypertable_size('value_minutes'), (SELECT count(*) FROM value_minutes)`).Scan(ctx, &bytes, &rows, &rollupBytes, &rollups); err != nil {
		return s, err
	}
	fmt.Printf("  storage: %d values in %.0f MiB with the index, %.1f MiB per million values\n",
		rows, float64(bytes)/(1<<20), float64(bytes)/(1<<20)/(float64(rows)/1e6))
	fmt.Printf("           %d minute rollups in %.0f MiB with the index (+%.1f%%)\n",
		rollups, float64(rollupBytes)/(1<<20), 100*float64(rollupBytes)/float64(bytes))
	err = h.DB.NewRaw(`SELECT public_id FROM variables WHERE account_id = ?`, acct).Scan(ctx, &s.variableID)
	return s, err
}

// queryCase is one analytics request measured through HTTP and as its compiled SQL.
type queryCase struct {
	name, path string
	body       string
	compile    func() (querybuilder.Query, error)
}

// measurePair returns the median wall times of a and b (measureAll of the two).
func measurePair(a, b func() error) (time.Duration, time.Duration, error) {
	t, err := measureAll(a, b)
	if err != nil {
		return 0, 0, err
	}
	return t[0], t[1], nil
}

// measureAll returns the median wall time of each run, after a warm-up, alternating
// them so that load from elsewhere falls on all alike. It runs each at least
// queryRuns times and, for fast queries, until pairTime has passed (at most maxRuns):
// at 100 ms a query, five runs on a shared 2-core machine left the median ±15% apart
// from one run of the benchmark to the next.
func measureAll(runs ...func() error) ([]time.Duration, error) {
	times := make([][]time.Duration, len(runs))
	start := time.Now()
	for i := -1; i < queryRuns || (time.Since(start) < pairTime && i < maxRuns); i++ {
		for k, run := range runs {
			t0 := time.Now()
			if err := run(); err != nil {
				return nil, err
			}
			if i >= 0 {
				times[k] = append(times[k], time.Since(t0))
			}
		}
	}
	medians := make([]time.Duration, len(runs))
	for k, t := range times {
		slices.Sort(t)
		medians[k] = t[len(t)/2]
	}
	return medians, nil
}

// benchQuery measures a case through HTTP and its floor: the same compiled statement
// run directly on the database, rows read and discarded.
func benchQuery(ctx context.Context, h *benchharness.Harness, token string, c queryCase) (viaHTTP, floor time.Duration, err error) {
	q, err := c.compile()
	if err != nil {
		return 0, 0, err
	}
	direct := func() error {
		rows, err := h.DB.QueryContext(ctx, q.SQL, store.BindArgs(q.Args)...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		_ = rows.Close()
		return rows.Err()
	}
	client := &loadgen.Client{HTTP: &http.Client{}, URL: h.URL, Token: token}
	overHTTP := func() error { return client.Do(ctx, http.MethodPost, c.path, []byte(c.body)) }
	viaHTTP, floor, err = measurePair(overHTTP, direct)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", c.name, err)
	}
	return viaHTTP, floor, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
