package querybuilder

import (
	"strings"
	"testing"
	"time"
)

// TestSignalGolden pins the statements of the time-aware aggregations (API.md §20):
// one per request, reading rows and packed days, intervals by lead() and lag(); over
// whole tiles where the range holds any (the tile path), raw values only in a range of
// less than a minute or without a range.
func TestSignalGolden(t *testing.T) {
	sig := Signal{Linear: true, MaxGap: 900}
	shortEnd := rsStart.Add(59 * time.Second)
	resamples := []struct {
		name string
		req  ResampleRequest
	}{
		{"resample_twa_1H_linear_gap.sql", ResampleRequest{7, rsIDs, "twa", Period{Hour, 1}, "Europe/Berlin", &rsStart, &rsEnd, TierBounds{}, sig, Series{}}},
		{"resample_integral_2D_locf_zero.sql", ResampleRequest{7, rsIDs, "integral", Period{Day, 2}, "Asia/Kathmandu", &rsStart, &rsEnd, TierBounds{}, Signal{}, Series{Fill: FillZero}}},
		{"resample_coverage_M_extend_linear.sql", ResampleRequest{7, rsIDs, "coverage", Period{Month, 1}, "UTC", &rsStart, nil, TierBounds{}, Signal{MaxGap: 60}, Series{Extend: true, Fill: FillLinear}}},
		{"resample_increase_1D_range.sql", ResampleRequest{7, rsIDs, "increase", Period{Day, 1}, "Europe/Berlin", &rsStart, &rsEnd, TierBounds{}, Signal{}, Series{}}},
		{"resample_increase_15T_last100.sql", ResampleRequest{7, rsIDs, "increase", Period{Minute, 15}, "UTC", nil, nil, TierBounds{}, Signal{}, Series{}}},
		{"resample_mean_1D_extend_previous.sql", ResampleRequest{7, rsIDs, "mean", Period{Day, 1}, "Europe/Berlin", &rsStart, &rsEnd, TierBounds{}, Signal{}, Series{Extend: true, Fill: FillPrevious, FillLimit: 3}}},
	}
	for _, tc := range resamples {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Resample(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			checkSignalQuery(t, tc.name, q)
		})
	}
	aggs := []struct {
		name string
		req  AggregationRequest
	}{
		{"aggregation_twa_join.sql", AggregationRequest{7, rsIDs, "twa", true, &rsStart, &rsEnd, TierBounds{}, sig}},
		{"aggregation_increase_end.sql", AggregationRequest{7, rsIDs, "increase", false, nil, &rsEnd, TierBounds{}, Signal{}}},
		{"aggregation_twa_raw_minute.sql", AggregationRequest{7, rsIDs, "twa", false, &rsStart, &shortEnd, TierBounds{}, sig}},
	}
	for _, tc := range aggs {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Aggregation(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			checkSignalQuery(t, tc.name, q)
		})
	}
	r := statsRequest([]string{"mean", "twa", "integral", "coverage", "increase"})
	r.Signal = sig
	q, err := Statistics(r)
	if err != nil {
		t.Fatal(err)
	}
	checkSignalQuery(t, "statistics_signal.sql", q)
}

func checkSignalQuery(t *testing.T, name string, q Query) {
	t.Helper()
	golden(t, name, q.SQL)
	if q.IEEE != nil {
		golden(t, strings.TrimSuffix(name, ".sql")+"_ieee.sql", q.IEEE.SQL)
	}
	if _, err := q.Inline(); err != nil {
		t.Fatalf("placeholders and args disagree: %v", err)
	}
	if !strings.Contains(q.SQL, "packed_dots(") || !strings.Contains(q.SQL, `"values"`) {
		t.Fatal("the statement must read both layouts")
	}
	if strings.Contains(name, "resample_mean") {
		return
	}
	wants := []string{"lead(p.ts) OVER w", "lag(p.lv) OVER w", "value_quarters m", "m.longest_ms"}
	if strings.Contains(name, "last100") || strings.Contains(name, "raw_minute") {
		wants = []string{"lead(p.ts) OVER w", "lag(p.value) OVER w"}
		if strings.Contains(q.SQL, "value_minutes") {
			t.Fatalf("%s reads tiles", name)
		}
	}
	for _, want := range wants {
		if !strings.Contains(q.SQL, want) {
			t.Fatalf("no %s in %s", want, name)
		}
	}
}
