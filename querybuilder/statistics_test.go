package querybuilder

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	statsStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	statsEnd   = time.Date(2026, 11, 21, 23, 59, 59, 999e6, time.UTC)
)

func statsRequest(aggs []string, refs ...VariableRef) StatisticsRequest {
	if len(refs) == 0 {
		refs = []VariableRef{{VariableID: "5f1c2a3b4c5d6e7f80912a3b"}}
	}
	return StatisticsRequest{AccountID: 42, Start: statsStart, End: statsEnd, Variables: refs, Aggregations: aggs}
}

func TestStatisticsGolden(t *testing.T) {
	cases := []struct {
		name string
		req  StatisticsRequest
	}{
		{"all", statsRequest(Aggregations)},
		{"count_only", statsRequest([]string{AggCount})},
		{"percentiles_only", statsRequest([]string{AggP75, AggP25})},
		{"first_last_only", statsRequest([]string{AggFirst, AggLast})},
		{"no_std_no_percentiles", statsRequest([]string{AggLast, AggMax, AggCount})},
		{"labels", statsRequest([]string{AggMin, AggMax, AggMean},
			VariableRef{VariableLabel: "temperature", DeviceLabel: "kitchen"},
			VariableRef{VariableLabel: "humidity", DeviceID: "0123456789abcdef01234567"},
			VariableRef{VariableID: "5f1c2a3b4c5d6e7f80912a3b", DeviceLabel: "kitchen"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Statistics(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "statistics_"+tc.name+".sql", q.SQL+"\n")
			if _, err := q.Inline(); err != nil {
				t.Fatalf("placeholders and arguments disagree: %v", err)
			}
		})
	}
}

// TestStatisticsArgs pins the argument list: the four reference arrays, the account
// once per lookup branch, then the range as the summaries read it: whole minutes
// [lo, hi) from value_minutes, raw values in [start, end] below lo and from hi on.
func TestStatisticsArgs(t *testing.T) {
	q, err := Statistics(statsRequest([]string{AggMean},
		VariableRef{VariableLabel: "temperature", DeviceLabel: "kitchen"},
		VariableRef{VariableID: "5f1c2a3b4c5d6e7f80912a3b"},
		VariableRef{VariableLabel: "humidity", DeviceID: "0123456789abcdef01234567"}))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := statsStart, statsEnd.Add(time.Millisecond) // both on a minute
	want := []any{
		[]string{"", "5f1c2a3b4c5d6e7f80912a3b", ""},
		[]string{"temperature", "", "humidity"},
		[]string{"", "", "0123456789abcdef01234567"},
		[]string{"kitchen", "", ""},
		int64(42), int64(42), int64(42),
		lo, hi,
		statsStart, statsEnd, lo,
		statsStart, statsEnd, lo, hi,
	}
	if !reflect.DeepEqual(q.Args, want) {
		t.Fatalf("args\n got %#v\nwant %#v", q.Args, want)
	}
}

// TestStatisticsCostsOnlyWhatIsAsked checks that each expensive piece appears exactly
// when an aggregation needing it is requested.
func TestStatisticsCostsOnlyWhatIsAsked(t *testing.T) {
	cases := []struct {
		aggs             []string
		sort, timeLookup bool
	}{
		{[]string{AggCount, AggSum, AggMean, AggStd}, false, false},
		{[]string{AggP50}, true, false},
		{[]string{AggFirst}, false, true},
		{[]string{AggMax}, false, true},
		{Aggregations, true, true},
	}
	for _, tc := range cases {
		q, err := Statistics(statsRequest(tc.aggs))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(q.SQL, "percentile_cont"); got != tc.sort {
			t.Errorf("%v: percentile_cont present = %v", tc.aggs, got)
		}
		if got := timeLookup.MatchString(q.SQL); got != tc.timeLookup {
			t.Errorf("%v: timestamp lookups present = %v", tc.aggs, got)
		}
		if n := strings.Count(q.SQL, "percentile_cont"); n > 1 {
			t.Errorf("%v: %d percentile_cont calls, want one sort", tc.aggs, n)
		}
	}
}

// timeLookup matches whatever finds the time of a value: TimescaleDB's first/last,
// the (value, ts) ordering of min/max, min/max of ts, or an index probe.
var timeLookup = regexp.MustCompile(`first\(|last\(|ROW\(|\(x\.ts\)|ORDER BY x\.ts`)

// TestStatisticsEndsOnlyProbe: first and last alone are LIMIT 1 probes at the ends of
// the index range, never a scan of every row in it.
func TestStatisticsEndsOnlyProbe(t *testing.T) {
	for _, aggs := range [][]string{{AggFirst}, {AggLast}, {AggLast, AggFirst}} {
		q, err := Statistics(statsRequest(aggs))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(q.SQL, "count(*)") || strings.Count(q.SQL, "LIMIT 1") != len(aggs) {
			t.Errorf("%v compiles to a scan:\n%s", aggs, q.SQL)
		}
		if n := len(q.Args); n != 7+2*len(aggs) {
			t.Errorf("%v: %d args, want the range once per probe", aggs, n)
		}
	}
}

func TestStatisticsDuplicateAggregationsCompileOnce(t *testing.T) {
	q, err := Statistics(statsRequest([]string{AggSum, AggSum, AggP50, AggP50}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(q.SQL, "sum(x.value)") != 1 || strings.Count(q.SQL, "0.5") != 1 {
		t.Fatalf("duplicates compiled twice:\n%s", q.SQL)
	}
}

func TestStatisticsRefusesBadRequests(t *testing.T) {
	if _, err := Statistics(statsRequest([]string{"median"})); err == nil {
		t.Error("unknown aggregation accepted")
	}
	r := statsRequest(Aggregations)
	r.Variables = nil
	if _, err := Statistics(r); err == nil {
		t.Error("no variables accepted")
	}
}

// TestStatisticsInjection sends SQL in every user-supplied string: none of it reaches
// the statement text, all of it travels in the arguments, and Inline quotes it.
func TestStatisticsInjection(t *testing.T) {
	evil := []string{
		`x'); DROP TABLE "values"; --`,
		`kitchen' OR '1'='1`,
		`5f1c2a3b4c5d6e7f80912a3b' UNION SELECT * FROM tokens --`,
		`?; SELECT pg_sleep(10)`,
	}
	q, err := Statistics(statsRequest(Aggregations,
		VariableRef{VariableLabel: evil[0], DeviceLabel: evil[1]},
		VariableRef{VariableID: evil[2], DeviceID: evil[3]}))
	if err != nil {
		t.Fatal(err)
	}
	clean, err := Statistics(statsRequest(Aggregations,
		VariableRef{VariableLabel: "a", DeviceLabel: "b"}, VariableRef{VariableID: "c", DeviceID: "d"}))
	if err != nil {
		t.Fatal(err)
	}
	if q.SQL != clean.SQL {
		t.Fatal("user input changed the statement text")
	}
	for _, e := range evil {
		if strings.Contains(q.SQL, e) {
			t.Errorf("%q spliced into the SQL", e)
		}
	}
	want := []any{
		[]string{"", evil[2]}, []string{evil[0], ""}, []string{"", evil[3]}, []string{evil[1], ""},
	}
	if !reflect.DeepEqual(q.Args[:4], want) {
		t.Fatalf("reference args %#v", q.Args[:4])
	}
	inlined, err := q.Inline()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(inlined, `'x''); DROP TABLE "values"; --'`) {
		t.Errorf("inlined text does not quote the label:\n%s", inlined)
	}
}

// TestStatisticsReadsMinutesUnlessPercentiles: without percentiles the
// statement reads minute rollups (std too, from their spreads); a percentile needs
// every value, so then the rollups are not read at all.
func TestStatisticsReadsMinutesUnlessPercentiles(t *testing.T) {
	for _, tc := range []struct {
		aggs    []string
		minutes bool
	}{
		{[]string{AggCount}, true},
		{[]string{AggSum, AggMean}, true},
		{[]string{AggCount, AggMin}, true},
		{[]string{AggFirst, AggMax, AggMean, AggLast}, true},
		{[]string{AggCount, AggStd}, true},
		{[]string{AggMin, AggP50}, false},
		{Aggregations, false},
	} {
		q, err := Statistics(statsRequest(tc.aggs))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(q.SQL, "value_minutes"); got != tc.minutes {
			t.Errorf("%v: reads value_minutes = %v, want %v", tc.aggs, got, tc.minutes)
		}
		if _, err := q.Inline(); err != nil {
			t.Errorf("%v: %v", tc.aggs, err)
		}
	}
}
