package querybuilder

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
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
		// a part per reference: each resolves its reference by the one lookup that can find it
		{"labels_percentiles", statsRequest([]string{AggP50},
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
		// one per layout (rows alone, or rows and packed days): a one-time filter runs one
		if n := strings.Count(q.SQL, "percentile_cont"); n > 2 {
			t.Errorf("%v: %d percentile_cont calls, want one sort per layout", tc.aggs, n)
		}
	}
}

// timeLookup matches whatever finds the time of a value: TimescaleDB's first/last,
// the (value, ts) ordering of min/max, min/max of ts, or an index probe.
var timeLookup = regexp.MustCompile(`first\(|last\(|ROW\(|\(x\.ts\)|ORDER BY x\.ts`)

func TestStatisticsDuplicateAggregationsCompileOnce(t *testing.T) {
	q, err := Statistics(statsRequest([]string{AggSum, AggSum, AggP50, AggP50}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(q.SQL, "sum(x.sum)") != 1 || strings.Count(q.SQL, "0.5") != strings.Count(q.SQL, "percentile_cont") {
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

// TestStatisticsReadsTiersAndRawOnlyForPercentiles: every aggregation but the
// percentiles comes from the rollup tiers (std too, from their spreads); a percentile
// needs every value, read by one GROUP BY over the raw values of all the variables.
func TestStatisticsReadsTiersAndRawOnlyForPercentiles(t *testing.T) {
	for _, tc := range []struct {
		aggs    []string
		grouped bool
	}{
		{[]string{AggCount}, false},
		{[]string{AggSum, AggMean}, false},
		{[]string{AggCount, AggMin}, false},
		{[]string{AggFirst, AggMax, AggMean, AggLast}, false},
		{[]string{AggCount, AggStd}, false},
		{[]string{AggMin, AggP50}, true},
		{Aggregations, true},
	} {
		q, err := Statistics(statsRequest(tc.aggs))
		if err != nil {
			t.Fatal(err)
		}
		for _, tier := range tiers.All {
			if !strings.Contains(q.SQL, tier.Table) {
				t.Errorf("%v: does not read %s", tc.aggs, tier.Table)
			}
		}
		if got := strings.Contains(q.SQL, "GROUP BY ids.id"); got != tc.grouped {
			t.Errorf("%v: raw GROUP BY = %v, want %v", tc.aggs, got, tc.grouped)
		}
		if _, err := q.Inline(); err != nil {
			t.Errorf("%v: %v", tc.aggs, err)
		}
	}
}

// TestPercentilePartsWriteOnlyTheLookupsThatCanMatch: a part of references by id joins
// by id alone; a part no lookup can match (a label without a device, which the API
// refuses) still compiles, to a part with no key.
func TestPercentilePartsWriteOnlyTheLookupsThatCanMatch(t *testing.T) {
	byDeviceLabel := "d.label = r.device_label AND v.label = r.variable_label"
	for _, tc := range []struct {
		ref                 VariableRef
		lookups, deviceJoin int // lookup subqueries in the statement; those by device label
		noKey               bool
	}{
		{VariableRef{VariableID: "5f1c2a3b4c5d6e7f80912a3b"}, 3 + 2, 1, false}, // res: 3; a part per layout: 1
		{VariableRef{VariableLabel: "t", DeviceLabel: "kitchen"}, 3 + 2, 1 + 2, false},
		{VariableRef{VariableLabel: "t"}, 3, 1, true},
	} {
		q, err := Statistics(statsRequest([]string{AggP50}, tc.ref))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Inline(); err != nil {
			t.Fatalf("%+v: placeholders and arguments disagree: %v", tc.ref, err)
		}
		if n := strings.Count(q.SQL, "WHERE v.account_id = ?") + strings.Count(q.SQL, "WHERE d.account_id = ?"); n != tc.lookups {
			t.Errorf("%+v: %d lookups, want %d", tc.ref, n, tc.lookups)
		}
		if n := strings.Count(q.SQL, byDeviceLabel); n != tc.deviceJoin {
			t.Errorf("%+v: %d lookups by device label, want %d", tc.ref, n, tc.deviceJoin)
		}
		if got := strings.Contains(q.SQL, "WHERE false"); got != tc.noKey {
			t.Errorf("%+v: a part with no key: %v, want %v", tc.ref, got, tc.noKey)
		}
	}
}
