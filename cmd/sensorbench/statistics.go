package main

import (
	"context"
	"fmt"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/querybuilder"
)

// benchStatistics: E7 over the year, all 11 aggregations and count only.
func benchStatistics(ctx context.Context, h *benchharness.Harness, s series) error {
	cases := []struct{ name, aggs string }{
		{"all 11 aggregations", ""},
		{"count only", `,"aggregations":["count"]`},
		// everything minute rollups and probes can answer (docs/queries.md)
		{"all but std and pXX", `,"aggregations":["first","last","min","max","count","sum","mean"]`},
	}
	fmt.Printf("statistics (E7) over %d points, median of ≥ %d runs (more for fast queries):\n", s.points, queryRuns)
	var all, count float64
	for i, c := range cases {
		body := fmt.Sprintf(`{"start":%d,"end":%d,"variables":[{"variable":"%s"}]%s}`,
			s.start.UnixMilli(), s.end.UnixMilli(), s.variableID, c.aggs)
		viaHTTP, floor, err := benchQuery(ctx, h, s.token, queryCase{name: c.name, path: "/api/v2.0/data/statistics", body: body,
			compile: func() (querybuilder.Query, error) {
				q, _, err := analytics.CompileStatistics([]byte(body), s.account, analytics.Bounds{})
				return q, err
			}})
		if err != nil {
			return err
		}
		fmt.Printf("  %-22s HTTP %8.1f ms   floor %8.1f ms   overhead %+5.1f%% (target ≤ 10%%)\n",
			c.name, ms(viaHTTP), ms(floor), 100*(ms(viaHTTP)/ms(floor)-1))
		switch i {
		case 0:
			all = ms(viaHTTP)
		case 1:
			count = ms(viaHTTP)
		}
	}
	fmt.Printf("  count only is %.1f× faster than all 11 (target ≥ 5×)\n", all/count)
	fmt.Println("  (count…max+std next to the naive SQL: the tiers workload, case B)")
	fmt.Println()
	return nil
}
