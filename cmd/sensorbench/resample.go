package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/querybuilder"
)

// benchResample: E8 1H mean and 1D max over the year, next to the floor (the compiled
// statement run directly) and a naive baseline (fetch every row, bucket in Go).
func benchResample(ctx context.Context, h *benchharness.Harness, s series) error {
	cases := []struct {
		period, agg string
		width       time.Duration
	}{{"1H", "mean", time.Hour}, {"1D", "max", 24 * time.Hour}}
	fmt.Printf("resample (E8) over %d points, median of ≥ %d runs (more for fast queries):\n", s.points, queryRuns)
	for _, c := range cases {
		body := fmt.Sprintf(`{"variables":["%s"],"aggregation":"%s","period":"%s","start":%d,"end":%d,"tz":"UTC"}`,
			s.variableID, c.agg, c.period, s.start.UnixMilli(), s.end.UnixMilli())
		viaHTTP, floor, err := benchQuery(ctx, h, s.token, queryCase{name: c.period + " " + c.agg, path: "/api/v1.6/data/stats/resample", body: body,
			compile: func() (querybuilder.Query, error) {
				_, q, err := analytics.CompileResample([]byte(body), s.account, analytics.Bounds{})
				return q, err
			}})
		if err != nil {
			return err
		}
		naive, err := measureOne(func() error { return naiveResample(ctx, h, s, c.width, c.agg) })
		if err != nil {
			return fmt.Errorf("naive %s: %w", c.period, err)
		}
		fmt.Printf("  %-8s HTTP %8.1f ms   floor %8.1f ms   overhead %+5.1f%% (target ≤ 10%%)   naive %8.1f ms = %.1f× slower (target ≥ 10×)\n",
			c.period+" "+c.agg, ms(viaHTTP), ms(floor), 100*(ms(viaHTTP)/ms(floor)-1), ms(naive), ms(naive)/ms(viaHTTP))
	}
	return benchAggregation(ctx, h, s)
}

// benchAggregation: E9 mean over the year, next to its floor.
func benchAggregation(ctx context.Context, h *benchharness.Harness, s series) error {
	body := fmt.Sprintf(`{"variables":["%s"],"aggregation":"mean","start":%d,"end":%d}`,
		s.variableID, s.start.UnixMilli(), s.end.UnixMilli())
	viaHTTP, floor, err := benchQuery(ctx, h, s.token, queryCase{name: "E9 mean", path: "/api/v1.6/data/stats/aggregation", body: body,
		compile: func() (querybuilder.Query, error) {
			_, q, err := analytics.CompileAggregation([]byte(body), s.account, analytics.Bounds{})
			return q, err
		}})
	if err != nil {
		return err
	}
	fmt.Printf("  %-8s HTTP %8.1f ms   floor %8.1f ms   overhead %+5.1f%% (aggregation E9, same range)\n\n",
		"mean", ms(viaHTTP), ms(floor), 100*(ms(viaHTTP)/ms(floor)-1))
	return nil
}

// measureOne is the median of at least queryRuns runs of one function (measurePair).
func measureOne(run func() error) (time.Duration, error) {
	d, _, err := measurePair(run, func() error { return nil })
	return d, err
}

// naiveResample is the baseline a service without a query compiler would be: read the
// rows into Go and bucket them there (UTC, fixed widths).
func naiveResample(ctx context.Context, h *benchharness.Harness, s series, width time.Duration, agg string) error {
	rows, err := h.DB.Pool.Query(ctx, `SELECT ts, value FROM "values" v JOIN variables x ON x.id = v.variable_id
		WHERE x.public_id = $1 AND ts BETWEEN $2 AND $3 ORDER BY ts`, s.variableID, s.start, s.end)
	if err != nil {
		return err
	}
	defer rows.Close()
	type acc struct{ sum, max, n float64 }
	buckets := map[int64]*acc{}
	for rows.Next() {
		var ts time.Time
		var v float64
		if err := rows.Scan(&ts, &v); err != nil {
			return err
		}
		k := ts.UnixNano() / int64(width)
		a := buckets[k]
		if a == nil {
			a = &acc{max: math.Inf(-1)}
			buckets[k] = a
		}
		a.sum, a.n, a.max = a.sum+v, a.n+1, math.Max(a.max, v)
	}
	if len(buckets) == 0 {
		return fmt.Errorf("no rows")
	}
	_ = agg // both aggregates are kept; the cost is reading the rows
	return rows.Err()
}
