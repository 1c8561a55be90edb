package analytics

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/querybuilder"
)

const fuzzAccount = 7

// checkRejected: a refused body is a 400 naming at least one field, or (E8/E9 only,
// allowString) the detail-only parse error of a body that is not a JSON object.
func checkRejected(t *testing.T, body []byte, err error, allowString bool) {
	t.Helper()
	var ae *fault.Error
	if !errors.As(err, &ae) || ae.Kind != fault.KindInvalid {
		t.Fatalf("rejection is not an invalid *fault.Error: %#v", err)
	}
	switch d := ae.Detail.(type) {
	case fault.Fields:
		if len(d) == 0 {
			t.Fatalf("400 names no field: %#v", ae)
		}
		for field, msgs := range d {
			if field == "" || len(msgs) == 0 {
				t.Fatalf("400 with an empty field or message list: %#v", d)
			}
		}
	case string:
		var m map[string]json.RawMessage
		if !allowString || !strings.HasPrefix(d, "JSON parse error - ") || (json.Unmarshal(body, &m) == nil && m != nil) {
			t.Fatalf("string detail %q for body %q", d, body)
		}
	default:
		t.Fatalf("400 detail %T", ae.Detail)
	}
}

// userStrings lists every JSON string value in body (at any depth): the text a client
// controls.
func userStrings(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// checkNoUserText: the SQL text is that of the same request with every value (keys,
// zone, times, period length) replaced by a placeholder — it depends only on the
// request's shape. So no user string (of 4+ characters, to skip words the compiler
// writes itself) reaches it: all of them travel as arguments.
func checkNoUserText(t *testing.T, body []byte, q, fixed querybuilder.Query) {
	t.Helper()
	if q.SQL == fixed.SQL {
		return
	}
	for _, s := range userStrings(body) {
		if len(s) >= 4 && strings.Contains(q.SQL, s) && !strings.Contains(fixed.SQL, s) {
			t.Fatalf("user text %q reached the SQL:\n%s", s, q.SQL)
		}
	}
	t.Fatalf("SQL depends on the request's values:\n%s\nvalue-free:\n%s", q.SQL, fixed.SQL)
}

// placeholderTime stands for a start or end, keeping whether it was given.
func placeholderTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	p := time.UnixMilli(1).UTC()
	return &p
}

// argHas tells whether s travels as an argument, alone or in a text array.
func argHas(args []any, s string) bool {
	for _, a := range args {
		switch x := a.(type) {
		case string:
			if x == s {
				return true
			}
		case []string:
			if slices.Contains(x, s) {
				return true
			}
		}
	}
	return false
}

func seedStatistics(f *testing.F) {
	for _, s := range []string{
		`{"start": 0, "end": 1, "variables": [{"variable": "0123456789abcdef01234567"}]}`,
		`{"start": 1000, "end": 2000.0, "decimalPlaces": 3, "aggregations": ["p50", "min", "p50"],
		  "variables": [{"variable": "~Temp", "device": "~Kitchen"}, {"variable": "~t", "device": "0123456789abcdef01234567"}]}`,
		`{"start": 5, "end": 4, "variables": []}`,
		`{"start": 5, "end": 4, "variables": [{"variable": "0123456789abcdef01234567"}]}`,
		`{"start": 0, "end": 253402300799999, "aggregations": ["first", "last"], "variables": [{"variable": "x'); DROP TABLE values; --", "device": "~a"}]}`,
		`{"start": "0", "end": null, "variables": [{"variable": "~noDevice"}], "aggregations": ["median", null, 1]}`,
		`{"start": 0, "end": 1, "variables": [{"variable": ""}, {"variable": "~a", "device": ""}, 3, null], "decimalPlaces": 17}`,
		`[]`, `null`, `{}`, `"x"`, `{"start": 1e300}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzParseStatistics: an accepted E7 body obeys API.md §7 and compiles to SQL that
// carries every client string as an argument; a refused one is a 400 naming a field.
func FuzzParseStatistics(f *testing.F) {
	seedStatistics(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, opts, err := ParseStatistics(body, fuzzAccount)
		if err != nil {
			checkRejected(t, body, err, false)
			return
		}
		checkStatisticsAccepted(t, req, opts)
		q, err := querybuilder.Statistics(req)
		if err != nil {
			t.Fatalf("accepted request does not compile: %v", err)
		}
		fixed, err := querybuilder.Statistics(placeholderStatistics(req))
		if err != nil {
			t.Fatalf("placeholder request does not compile: %v", err)
		}
		checkNoUserText(t, body, q, fixed)
		for _, r := range req.Variables {
			for _, s := range []string{r.VariableID, r.VariableLabel, r.DeviceID, r.DeviceLabel} {
				if s != "" && !argHas(q.Args, s) {
					t.Fatalf("key %q is not an argument: %#v", s, q.Args)
				}
			}
		}
	})
}

// timeAware are E7's aggregations beyond its default eleven (API.md §20).
var timeAware = []string{querybuilder.AggTWA, querybuilder.AggIntegral, querybuilder.AggCoverage, querybuilder.AggIncrease}

func checkStatisticsAccepted(t *testing.T, req querybuilder.StatisticsRequest, opts StatisticsOptions) {
	t.Helper()
	switch {
	case opts.Start < 0 || opts.End < opts.Start || opts.End > maxTimestampMs:
		t.Fatalf("range %d..%d accepted", opts.Start, opts.End)
	case !req.Start.Equal(time.UnixMilli(opts.Start)) || !req.End.Equal(time.UnixMilli(opts.End)):
		t.Fatalf("range %v..%v does not match %d..%d", req.Start, req.End, opts.Start, opts.End)
	case len(req.Variables) < 1 || len(req.Variables) > MaxStatisticsVariables || len(opts.Keys) != len(req.Variables):
		t.Fatalf("%d variables, %d keys accepted", len(req.Variables), len(opts.Keys))
	case len(req.Aggregations) == 0 || len(req.Aggregations) > len(querybuilder.Aggregations)+len(timeAware):
		t.Fatalf("aggregations %v accepted", req.Aggregations)
	case opts.DecimalPlaces != nil && (*opts.DecimalPlaces < 0 || *opts.DecimalPlaces > MaxDecimalPlaces):
		t.Fatalf("decimalPlaces %d accepted", *opts.DecimalPlaces)
	}
	seen := map[string]bool{}
	for _, a := range req.Aggregations {
		if !querybuilder.IsStatisticsAggregation(a) || seen[a] {
			t.Fatalf("aggregations %v: unknown or repeated %q", req.Aggregations, a)
		}
		seen[a] = true
	}
	// keys that can match nothing ("~") are kept as empty refs: they answer a 404 entry
	for i, r := range req.Variables {
		key := opts.Keys[i]
		byLabel := strings.HasPrefix(key, "~")
		if key == "" || (r.VariableID != "" && r.VariableLabel != "") || (r.DeviceID != "" && r.DeviceLabel != "") ||
			byLabel == (r.VariableID != "") || (!byLabel && r.VariableID != key) {
			t.Fatalf("variables.%d %q accepted as %+v", i, key, r)
		}
	}
}

// placeholderStatistics replaces the range and every key with fixed values, keeping
// which keys are given.
func placeholderStatistics(req querybuilder.StatisticsRequest) querybuilder.StatisticsRequest {
	mask := func(s string) string {
		if s == "" {
			return ""
		}
		return "k"
	}
	out := req
	out.Start, out.End = time.UnixMilli(1).UTC(), time.UnixMilli(2).UTC()
	out.Variables = make([]querybuilder.VariableRef, len(req.Variables))
	for i, r := range req.Variables {
		out.Variables[i] = querybuilder.VariableRef{VariableID: mask(r.VariableID), VariableLabel: mask(r.VariableLabel),
			DeviceID: mask(r.DeviceID), DeviceLabel: mask(r.DeviceLabel)}
	}
	return out
}

func seedResample(f *testing.F) {
	for _, s := range []string{
		`{"variables": ["0123456789abcdef01234567"], "aggregation": "mean", "period": "T"}`,
		`{"variables": ["a", "b"], "aggregation": "sum", "period": "15T", "tz": "America/New_York", "start": 0, "end": 1, "join_dataframes": true, "precision": 2}`,
		`{"variables": ["x'); DELETE FROM variables; --"], "aggregation": "max", "period": "100000D", "tz": "Europe/Madrid", "end": 253402300799999}`,
		`{"variables": ["a"], "aggregation": "count", "period": "W", "tz": "America/Havana", "start": 5}`,
		`{"variables": ["a"], "aggregation": "mean", "period": "3H", "tz": "Atlantic/Azores", "start": 5, "end": 5}`,
		`{"variables": ["a"], "aggregation": "sum", "period": "2D", "tz": "Australia/Lord_Howe"}`,
		`{"variables": ["a"], "aggregation": "min", "period": "M", "tz": "Asia/Kathmandu"}`,
		`{"variables": [], "aggregation": "median", "period": "0T", "tz": "Local", "start": 2, "end": 1}`,
		`{"variables": [null, 1], "aggregation": null, "period": "1000001H", "tz": "posix/UTC", "precision": 17}`,
		`{"variables": ["a"], "aggregation": "mean", "period": "w", "tz": "", "join_dataframes": "yes"}`,
		`[]`, `null`, `{}`, `{"variables"`, `"x"`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzParseResample: an accepted E8 body obeys API.md §8 and compiles with every
// client string as an argument; a refused one is a 400 naming a field (or a parse error).
func FuzzParseResample(f *testing.F) {
	seedResample(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseResample(body, fuzzAccount)
		if err != nil {
			checkRejected(t, body, err, true)
			return
		}
		if r == nil {
			t.Fatalf("neither a request nor an error for %q", body)
		}
		checkCommonAccepted(t, r.Query.VariableIDs, r.Query.Aggregation, r.Query.Start, r.Query.End, r.Precision)
		checkPeriod(t, r.Query.Period)
		checkZone(t, r.Query.Zone)
		q, err := querybuilder.Resample(r.Query)
		if err != nil {
			t.Fatalf("accepted request does not compile: %v", err)
		}
		shadow := r.Query
		shadow.VariableIDs, shadow.Zone = placeholderIDs(r.Query.VariableIDs), "UTC"
		shadow.Start, shadow.End, shadow.Period.N = placeholderTime(r.Query.Start), placeholderTime(r.Query.End), 1
		fixed, err := querybuilder.Resample(shadow)
		if err != nil {
			t.Fatalf("placeholder request does not compile: %v", err)
		}
		checkNoUserText(t, body, q, fixed)
		if !argHas(q.Args, r.Query.Zone) {
			t.Fatalf("zone %q is not an argument", r.Query.Zone)
		}
		checkIDArgs(t, q, r.Query.VariableIDs)
	})
}

// FuzzParseAggregation: the E9 counterpart of FuzzParseResample.
func FuzzParseAggregation(f *testing.F) {
	seedResample(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := ParseAggregation(body, fuzzAccount)
		if err != nil {
			checkRejected(t, body, err, true)
			return
		}
		checkCommonAccepted(t, a.Query.VariableIDs, a.Query.Aggregation, a.Query.Start, a.Query.End, a.Precision)
		q, err := querybuilder.Aggregation(a.Query)
		if err != nil {
			t.Fatalf("accepted request does not compile: %v", err)
		}
		shadow := a.Query
		shadow.VariableIDs = placeholderIDs(a.Query.VariableIDs)
		shadow.Start, shadow.End = placeholderTime(a.Query.Start), placeholderTime(a.Query.End)
		fixed, err := querybuilder.Aggregation(shadow)
		if err != nil {
			t.Fatalf("placeholder request does not compile: %v", err)
		}
		checkNoUserText(t, body, q, fixed)
		checkIDArgs(t, q, a.Query.VariableIDs)
	})
}

func checkCommonAccepted(t *testing.T, ids []string, agg string, start, end *time.Time, precision int) {
	t.Helper()
	switch {
	case len(ids) < 1 || len(ids) > maxVariables:
		t.Fatalf("%d variables accepted", len(ids))
	case !querybuilder.IsResampleAggregation(agg):
		t.Fatalf("aggregation %q accepted", agg)
	case start != nil && end != nil && end.Before(*start):
		t.Fatalf("range %v..%v accepted", start, end)
	case start != nil && (start.UnixMilli() < 0 || start.UnixMilli() > maxMillis):
		t.Fatalf("start %v accepted", start)
	case end != nil && (end.UnixMilli() < 0 || end.UnixMilli() > maxMillis):
		t.Fatalf("end %v accepted", end)
	case precision < -1 || precision > 16:
		t.Fatalf("precision %d accepted", precision)
	}
}

func placeholderIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i := range out {
		out[i] = "k"
	}
	return out
}

// checkIDArgs: the ids are the statement's first argument, as given and in order.
func checkIDArgs(t *testing.T, q querybuilder.Query, ids []string) {
	t.Helper()
	if got, ok := q.Args[0].([]string); !ok || !slices.Equal(got, ids) {
		t.Fatalf("first argument %#v, want the ids %q", q.Args[0], ids)
	}
}

// checkPeriod: n in 1..100000 and a unit of API.md §8 (W and M are single).
func checkPeriod(t *testing.T, p querybuilder.Period) {
	t.Helper()
	switch p.Unit {
	case querybuilder.Minute, querybuilder.Hour, querybuilder.Day:
		if p.N < 1 || p.N > maxPeriodN {
			t.Fatalf("period %+v accepted", p)
		}
	case querybuilder.Week, querybuilder.Month:
		if p.N != 1 {
			t.Fatalf("period %+v accepted", p)
		}
	default:
		t.Fatalf("period unit %q accepted", p.Unit)
	}
}

// checkZone: an IANA name that loads, never the server's own zone.
func checkZone(t *testing.T, zone string) {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "" || zone == "Local" || loc == time.Local || loc.String() != zone {
		t.Fatalf("zone %q accepted (%v)", zone, err)
	}
}

// objectWith is a reader over {name: raw}.
func objectWith(name string, raw json.RawMessage) *validate.Object {
	return validate.NewObject(map[string]json.RawMessage{name: raw}, fault.Fields{}, "")
}

// checkOnlyField: a refusal names exactly the field read.
func checkOnlyField(t *testing.T, o *validate.Object, name string) {
	t.Helper()
	if len(o.Errs) != 1 || len(o.Errs[name]) == 0 {
		t.Fatalf("refusal detail %v, want messages on %q only", o.Errs, name)
	}
}

// FuzzPeriod: an accepted period is within API.md §8 and is the canonical spelling of
// what it parsed to (a bare unit meaning 1); anything else is refused on period.
func FuzzPeriod(f *testing.F) {
	for _, s := range []string{"T", "1T", "15T", "100000T", "100001T", "0T", "01T", "H", "24H", "D", "7D", "W", "M",
		"2W", "1M", "t", "5min", "", " 5T", "5T\n", "-1D", "1e3T", "５T", "999999D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, _ := json.Marshal(s)
		o := objectWith("period", raw)
		p, ok := readPeriod(o)
		if !ok {
			checkOnlyField(t, o, "period")
			return
		}
		if len(o.Errs) != 0 {
			t.Fatalf("period %q accepted with messages %v", s, o.Errs)
		}
		checkPeriod(t, p)
		if p.String() != s && p.String() != "1"+s {
			t.Fatalf("period %q parsed as %v", s, p)
		}
	})
}

// FuzzZone: an accepted tz is an IANA name that loads and is not the server's zone or
// a copy of a zone under posix/ or right/; anything else is refused on tz.
func FuzzZone(f *testing.F) {
	for _, s := range []string{"UTC", "America/New_York", "Europe/Madrid", "Asia/Kathmandu", "Etc/GMT+12", "utc",
		"", "Local", "localtime", "posixrules", "posix/UTC", "right/UTC", "../etc/passwd", "/etc/localtime",
		"America/New_York/", "EST5EDT", "CET-1CEST,M3.5.0,M10.5.0/3", "Europe\\Madrid", "Factory"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, _ := json.Marshal(s)
		o := objectWith("tz", raw)
		zone := readZone(o)
		if len(o.Errs) != 0 {
			checkOnlyField(t, o, "tz")
			if zone != "" {
				t.Fatalf("refused tz %q still returned %q", s, zone)
			}
			return
		}
		if zone != s || strings.HasPrefix(s, "posix/") || strings.HasPrefix(s, "right/") {
			t.Fatalf("tz %q accepted as %q", s, zone)
		}
		checkZone(t, zone)
	})
}
