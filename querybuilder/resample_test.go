package querybuilder

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	rsStart = time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	rsEnd   = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	rsIDs   = []string{"0123456789abcdef01234567", "89abcdef0123456789abcdef"}
)

func TestResampleGolden(t *testing.T) {
	cases := []struct {
		name string
		req  ResampleRequest
	}{
		{"resample_15T_range.sql", ResampleRequest{7, rsIDs, "mean", Period{Minute, 15}, "America/New_York", &rsStart, &rsEnd, TierBounds{}, Signal{}, Series{}}},
		{"resample_5H_count_last100.sql", ResampleRequest{7, rsIDs, "count", Period{Hour, 5}, "Pacific/Chatham", nil, nil, TierBounds{}, Signal{}, Series{}}},
		{"resample_2D_sum_start.sql", ResampleRequest{7, rsIDs, "sum", Period{Day, 2}, "Australia/Lord_Howe", &rsStart, nil, TierBounds{}, Signal{}, Series{}}},
		{"resample_W_min_end.sql", ResampleRequest{7, rsIDs, "min", Period{Week, 1}, "Europe/Berlin", nil, &rsEnd, TierBounds{}, Signal{}, Series{}}},
		{"resample_M_max.sql", ResampleRequest{7, rsIDs, "max", Period{Month, 1}, "Asia/Kolkata", &rsStart, &rsEnd, TierBounds{}, Signal{}, Series{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Resample(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, q.SQL)
			if sums := tc.req.Aggregation == "sum" || tc.req.Aggregation == "mean"; sums != (q.IEEE != nil) {
				t.Fatalf("%s: IEEE fallback %v", tc.req.Aggregation, q.IEEE != nil)
			}
			if q.IEEE != nil {
				golden(t, strings.TrimSuffix(tc.name, ".sql")+"_ieee.sql", q.IEEE.SQL)
			}
			if !reflect.DeepEqual(q.Args[:2], []any{rsIDs, int64(7)}) || !slices.Contains(q.Args, any(tc.req.Zone)) {
				t.Fatalf("args %#v", q.Args)
			}
			if _, err := q.Inline(); err != nil {
				t.Fatalf("placeholders and args disagree: %v", err)
			}
		})
	}
}

func TestAggregationGolden(t *testing.T) {
	cases := []struct {
		name string
		req  AggregationRequest
	}{
		{"aggregation_mean.sql", AggregationRequest{7, rsIDs, "mean", false, &rsStart, &rsEnd, TierBounds{}, Signal{}}},
		{"aggregation_mean_join.sql", AggregationRequest{7, rsIDs, "mean", true, &rsStart, &rsEnd, TierBounds{}, Signal{}}},
		{"aggregation_min.sql", AggregationRequest{7, rsIDs, "min", false, nil, nil, TierBounds{}, Signal{}}},
		{"aggregation_max_join.sql", AggregationRequest{7, rsIDs, "max", true, nil, &rsEnd, TierBounds{}, Signal{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Aggregation(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, q.SQL)
			if q.Args[0].([]string)[1] != rsIDs[1] || q.Args[1] != int64(7) {
				t.Fatalf("ids and account must lead the args: %#v", q.Args)
			}
			if _, err := q.Inline(); err != nil {
				t.Fatalf("placeholders and args disagree: %v", err)
			}
		})
	}
}

// Zone names and ids are arguments: quotes in them never reach the SQL text.
func TestResampleInjection(t *testing.T) {
	evilZone := "UTC' ; DROP TABLE \"values\"; --"
	evilID := "x'); DELETE FROM variables; --"
	q, err := Resample(ResampleRequest{1, []string{evilID}, "sum", Period{Day, 1}, evilZone, nil, nil, TierBounds{}, Signal{}, Series{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"DROP", "DELETE", "x'"} {
		if strings.Contains(q.SQL, bad) {
			t.Fatalf("user text spliced into SQL: %s", q.SQL)
		}
	}
	if q.Args[0].([]string)[0] != evilID || q.Args[2] != evilZone {
		t.Fatalf("args %#v", q.Args)
	}
	a, err := Aggregation(AggregationRequest{1, []string{evilID}, "mean", true, nil, nil, TierBounds{}, Signal{}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(a.SQL, "DELETE") || a.Args[0].([]string)[0] != evilID {
		t.Fatalf("aggregation spliced user text: %s %#v", a.SQL, a.Args)
	}
}

func TestUnknownAggregationRefused(t *testing.T) {
	if _, err := Resample(ResampleRequest{Aggregation: "median"}); err == nil {
		t.Fatal("median accepted by Resample")
	}
	if _, err := Aggregation(AggregationRequest{Aggregation: "avg(value)); --"}); err == nil {
		t.Fatal("unknown aggregation accepted by Aggregation")
	}
}

func TestPeriodString(t *testing.T) {
	for p, want := range map[Period]string{{Minute, 15}: "15T", {Hour, 1}: "1H", {Day, 2}: "2D", {Week, 1}: "W", {Month, 1}: "M"} {
		if p.String() != want {
			t.Errorf("%#v: %s, want %s", p, p.String(), want)
		}
	}
}
