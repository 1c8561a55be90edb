package analytics

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/querybuilder"
)

func TestParseResample(t *testing.T) {
	start, end := time.UnixMilli(1000).UTC(), time.UnixMilli(2000).UTC()
	cases := []struct {
		body string
		want Resample
	}{
		{`{"variables":["a"],"aggregation":"mean","period":"T"}`,
			Resample{Query: querybuilder.ResampleRequest{AccountID: 9, VariableIDs: []string{"a"}, Aggregation: "mean",
				Period: querybuilder.Period{Unit: querybuilder.Minute, N: 1}, Zone: "UTC"}, Precision: -1}},
		{`{"variables":["a","b"],"aggregation":"sum","period":"100000H","tz":"Pacific/Chatham","start":1000,"end":2000,"join_dataframes":true,"precision":3}`,
			Resample{Query: querybuilder.ResampleRequest{AccountID: 9, VariableIDs: []string{"a", "b"}, Aggregation: "sum",
				Period: querybuilder.Period{Unit: querybuilder.Hour, N: 100000}, Zone: "Pacific/Chatham", Start: &start, End: &end},
				Join: true, Precision: 3}},
		{`{"variables":["a"],"aggregation":"count","period":"W","start":null,"precision":null}`,
			Resample{Query: querybuilder.ResampleRequest{AccountID: 9, VariableIDs: []string{"a"}, Aggregation: "count",
				Period: querybuilder.Period{Unit: querybuilder.Week, N: 1}, Zone: "UTC"}, Precision: -1}},
		{`{"variables":["a"],"aggregation":"max","period":"M","tz":"Etc/GMT+5"}`,
			Resample{Query: querybuilder.ResampleRequest{AccountID: 9, VariableIDs: []string{"a"}, Aggregation: "max",
				Period: querybuilder.Period{Unit: querybuilder.Month, N: 1}, Zone: "Etc/GMT+5"}, Precision: -1}},
	}
	for _, tc := range cases {
		got, err := ParseResample([]byte(tc.body), 9)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s\n got %+v\nwant %+v", tc.body, *got, tc.want)
		}
	}
}

// TestParseSignal reads the time-aware fields into the compiler's request.
func TestParseSignal(t *testing.T) {
	r, err := ParseResample([]byte(`{"variables":["a"],"aggregation":"twa","period":"1H","start":1000,"method":"linear",
		"max_gap":90.5,"fill":"previous","fill_limit":3,"extend":true}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	q := r.Query
	if !q.Linear || q.MaxGap != 90.5 || q.Fill != querybuilder.FillPrevious || q.FillLimit != 3 || !q.Extend {
		t.Fatalf("%+v", r)
	}
	a, err := ParseAggregation([]byte(`{"variables":["a"],"aggregation":"increase","method":"locf"}`), 1)
	if err != nil || a.Query.Linear || a.Query.Aggregation != "increase" {
		t.Fatalf("%+v %v", a, err)
	}
	_, _, err = ParseStatistics([]byte(`{"start":0,"end":1,"variables":[{"variable":"x"}],"aggregations":["twa"],"method":"cubic"}`), 1)
	var ae *fault.Error
	if !errors.As(err, &ae) || len(ae.Detail.(fault.Fields)["method"]) == 0 {
		t.Fatalf("statistics method: %v", err)
	}
}

func TestParseResampleRefuses(t *testing.T) {
	base := `"variables":["a"],"aggregation":"mean"`
	cases := map[string]string{
		`{` + base + `,"period":"15min"}`:                      "period",
		`{` + base + `,"period":"1d"}`:                         "period",
		`{` + base + `,"period":"2W"}`:                         "period",
		`{` + base + `,"period":"0D"}`:                         "period",
		`{` + base + `,"period":"01D"}`:                        "period",
		`{` + base + `,"period":"9999999999999999999999T"}`:    "period",
		`{` + base + `}`:                                       "period",
		`{` + base + `,"period":"D","tz":"Local"}`:             "tz",
		`{` + base + `,"period":"D","tz":""}`:                  "tz",
		`{` + base + `,"period":"D","tz":"UTC+3"}`:             "tz",
		`{` + base + `,"period":"D","tz":"../../etc/passwd"}`:  "tz",
		`{` + base + `,"period":"D","start":5,"end":4}`:        "end",
		`{` + base + `,"period":"D","start":-1}`:               "start",
		`{` + base + `,"period":"D","precision":-1}`:           "precision",
		`{"variables":[],"aggregation":"mean","period":"D"}`:   "variables",
		`{"variables":[1],"aggregation":"mean","period":"D"}`:  "variables.0",
		`{"variables":["a"],"aggregation":"avg","period":"D"}`: "aggregation",
		`{"variables":["a"],"period":"D"}`:                     "aggregation",
		// the time-aware fields (API.md §20)
		`{` + base + `,"period":"D","method":"spline"}`: "method",
		`{` + base + `,"period":"D","method":1}`:        "method",
		`{` + base + `,"period":"D","max_gap":0}`:       "max_gap",
		`{` + base + `,"period":"D","max_gap":-5}`:      "max_gap",
		`{` + base + `,"period":"D","max_gap":"60"}`:    "max_gap",
		`{` + base + `,"period":"D","max_gap":1e13}`:    "max_gap",
		`{` + base + `,"period":"D","fill":"nearest"}`:  "fill",
		`{` + base + `,"period":"D","fill":null}`:       "fill",
		`{` + base + `,"period":"D","fill_limit":0}`:    "fill_limit",
		`{` + base + `,"period":"D","fill_limit":1.5}`:  "fill_limit",
		`{` + base + `,"period":"D","extend":"yes"}`:    "extend",
	}
	for body, field := range cases {
		_, err := ParseResample([]byte(body), 1)
		var ae *fault.Error
		if !errors.As(err, &ae) || ae.Kind != fault.KindInvalid || len(ae.Detail.(fault.Fields)[field]) == 0 {
			t.Errorf("%s: want invalid on %s, got %v", body, field, err)
		}
	}
}

// TestParseJSONErrorsAreDetailOnly: a body that is not a JSON object is invalid with a
// sentence, not fields, which HTTP renders as {"detail": ...} alone (pkg/apierr).
func TestParseJSONErrorsAreDetailOnly(t *testing.T) {
	for _, body := range []string{`{`, `[]`, `null`, `"x"`} {
		_, err := ParseAggregation([]byte(body), 1)
		var ae *fault.Error
		if !errors.As(err, &ae) || ae.Kind != fault.KindInvalid {
			t.Fatalf("%s: %v", body, err)
		}
		if d, ok := ae.Detail.(string); !ok || !strings.HasPrefix(d, "JSON parse error - ") {
			t.Errorf("%s: detail %#v, want a parse error sentence", body, ae.Detail)
		}
	}
}

func TestShapeJoin(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	ts := func(n int64) *int64 { return &n }
	r := Resample{Query: querybuilder.ResampleRequest{VariableIDs: []string{"x", "y"}}, Join: true, Precision: 1}
	got, _ := json.Marshal(r.Shape([]Row{{1, ts(20), v(1.25)}, {1, ts(10), nil}, {2, ts(30), v(-2.25)}, {2, ts(20), v(3)}}))
	want := `{"results":[[30,null,-2.3],[20,1.3,3],[10,null,null]],"columns":["timestamp","x.value.value","y.value.value"]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
