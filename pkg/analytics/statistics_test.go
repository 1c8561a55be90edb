package analytics

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/querybuilder"
)

func TestParseStatistics(t *testing.T) {
	body := `{"start": 1000, "end": 2000.0, "decimalPlaces": 3,
		"aggregations": ["p50", "min", "p50"],
		"variables": [
			{"variable": "0123456789abcdef01234567"},
			{"variable": "~Temp", "device": "~Kitchen"},
			{"variable": "~hum", "device": "89abcdef0123456789abcdef"},
			{"variable": "0123456789abcdef01234567", "device": "~kitchen", "extra": true},
			{"variable": "~bad label!", "device": "~k"}
		]}`
	req, opts, err := ParseStatistics([]byte(body), 7)
	if err != nil {
		t.Fatal(err)
	}
	wantReq := querybuilder.StatisticsRequest{
		AccountID: 7, Start: time.UnixMilli(1000).UTC(), End: time.UnixMilli(2000).UTC(),
		Aggregations: []string{"p50", "min"},
		Variables: []querybuilder.VariableRef{
			{VariableID: "0123456789abcdef01234567"},
			{VariableLabel: "temp", DeviceLabel: "kitchen"},
			{VariableLabel: "hum", DeviceID: "89abcdef0123456789abcdef"},
			{VariableID: "0123456789abcdef01234567", DeviceLabel: "kitchen"},
			{VariableLabel: "bad label!", DeviceLabel: "k"}, // matches nothing: a 404 entry
		},
	}
	if !reflect.DeepEqual(req, wantReq) {
		t.Errorf("request\n got %+v\nwant %+v", req, wantReq)
	}
	wantKeys := []string{"0123456789abcdef01234567", "~Temp", "~hum", "0123456789abcdef01234567", "~bad label!"}
	if !reflect.DeepEqual(opts.Keys, wantKeys) || opts.Start != 1000 || opts.End != 2000 ||
		opts.DecimalPlaces == nil || *opts.DecimalPlaces != 3 {
		t.Errorf("options %+v", opts)
	}
}

func TestParseStatisticsDefaults(t *testing.T) {
	req, opts, err := ParseStatistics([]byte(`{"start":5,"end":5,"variables":[{"variable":"x"}],"decimalPlaces":null}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req.Aggregations, []string{"first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"}) {
		t.Errorf("default aggregations %v", req.Aggregations)
	}
	if opts.DecimalPlaces != nil {
		t.Errorf("decimalPlaces %v, want the account's", *opts.DecimalPlaces)
	}
}

func TestParseStatisticsErrors(t *testing.T) {
	cases := map[string]string{
		`{"start":1,"end":0,"variables":[{"variable":"~t"}]}`: "end variables.0.device",
		`[1]`:      "body",
		`{"start"`: "body",
	}
	for body, want := range cases {
		_, _, err := ParseStatistics([]byte(body), 1)
		var ae *fault.Error
		if !errors.As(err, &ae) || ae.Kind != fault.KindInvalid {
			t.Fatalf("%s: %v", body, err)
		}
		if got := fieldNames(ae.Detail.(fault.Fields)); got != want {
			t.Errorf("%s: fields %q, want %q", body, got, want)
		}
	}
}

func fieldNames(f fault.Fields) string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}
