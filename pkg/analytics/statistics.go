package analytics

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/querybuilder"
)

// Limits of an E7 body (API.md §7, §6 for the time range).
const (
	MaxStatisticsVariables = 1000
	MaxDecimalPlaces       = 16
	maxTimestampMs         = 253402300799999 // 9999-12-31T23:59:59.999Z
)

// StatisticsOptions are the parts of an E7 request that shape the answer rather than
// the statement.
type StatisticsOptions struct {
	Start, End    int64    // as given, echoed in the answer
	DecimalPlaces *int     // nil: the account's setting applies
	Keys          []string // each entry's variable key as given, for its 404 entry
	Aggregations  []string // requested, deduplicated, in request order
}

// ParseStatistics validates an E7 body (API.md §7) for the account and returns the
// compiler request and the answer options. Invalid input is an invalid *fault.Error
// naming every bad field by its dotted path.
func ParseStatistics(body []byte, accountID int64) (querybuilder.StatisticsRequest, StatisticsOptions, error) {
	var req querybuilder.StatisticsRequest
	var opts StatisticsOptions
	raw, err := decodeStatisticsBody(body)
	if err != nil {
		return req, opts, err
	}
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require("start", "end", "variables")
	start, okStart := o.Int("start", 0, maxTimestampMs)
	end, okEnd := o.Int("end", 0, maxTimestampMs)
	if okStart && okEnd && end < start {
		o.Fail("end", "Ensure end is greater than or equal to start.")
	}
	refs, keys := parseStatisticsVariables(o)
	aggs := parseStatisticsAggregations(o)
	places := parseStatisticsDecimalPlaces(o)
	signal := readSignal(o)
	if err := errs.Err(); err != nil {
		return req, opts, err
	}
	req = querybuilder.StatisticsRequest{AccountID: accountID, Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end).UTC(),
		Variables: refs, Aggregations: aggs, Signal: signal}
	opts = StatisticsOptions{Start: start, End: end, DecimalPlaces: places, Keys: keys, Aggregations: aggs}
	return req, opts, nil
}

// decodeStatisticsBody decodes a body that must be a JSON object into its raw fields.
func decodeStatisticsBody(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	err := json.Unmarshal(body, &m)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) || (err == nil && m == nil):
		return nil, fault.ParseError("expected a JSON object")
	case err != nil:
		return nil, fault.ParseError(err.Error())
	}
	return m, nil
}

// parseStatisticsVariables reads `variables`: 1–1000 objects {"variable": KEY, "device": KEY},
// device required with a ~label variable. Keys that cannot match anything are kept:
// they find no row, which answers that entry with a 404 like any unknown key.
func parseStatisticsVariables(o *validate.Object) ([]querybuilder.VariableRef, []string) {
	items, ok := o.List("variables")
	if !ok {
		return nil, nil
	}
	switch {
	case len(items) == 0:
		o.Fail("variables", "Ensure this field has at least 1 elements.")
		return nil, nil
	case len(items) > MaxStatisticsVariables:
		o.Fail("variables", fmt.Sprintf("Ensure this field has no more than %d elements.", MaxStatisticsVariables))
		return nil, nil
	}
	refs := make([]querybuilder.VariableRef, 0, len(items))
	keys := make([]string, 0, len(items))
	for i, it := range items {
		ref, key, ok := parseStatisticsVariable(o, fmt.Sprintf("variables.%d", i), it)
		if ok {
			refs = append(refs, ref)
			keys = append(keys, key)
		}
	}
	return refs, keys
}

func parseStatisticsVariable(o *validate.Object, path string, item json.RawMessage) (querybuilder.VariableRef, string, bool) {
	var ref querybuilder.VariableRef
	var m map[string]json.RawMessage
	if err := json.Unmarshal(item, &m); err != nil || m == nil {
		o.Errs.Add(path, validate.MsgObject)
		return ref, "", false
	}
	it := validate.NewObject(m, o.Errs, path+".")
	if !it.Require("variable") {
		return ref, "", false
	}
	varKey, ok := requiredKey(it, "variable")
	if !ok {
		return ref, "", false
	}
	v, _ := validate.ParseKey(varKey)
	ref.VariableID, ref.VariableLabel = v.ID, v.Label
	if !it.Has("device") || it.IsNull("device") {
		if v.ID == "" {
			it.Fail("device", "This field is required when variable is a ~label.")
			return ref, "", false
		}
		return ref, varKey, true
	}
	devKey, ok := requiredKey(it, "device")
	if !ok {
		return ref, "", false
	}
	d, _ := validate.ParseKey(devKey)
	ref.DeviceID, ref.DeviceLabel = d.ID, d.Label
	return ref, varKey, true
}

// requiredKey reads a key field: a non-empty string.
func requiredKey(o *validate.Object, name string) (string, bool) {
	s, ok := o.String(name, 0)
	if ok && s == "" {
		o.Fail(name, validate.MsgBlank)
		return "", false
	}
	return s, ok
}

// parseStatisticsAggregations reads `aggregations` (default: all, canonical order), dropping
// repeats so that each is computed and answered once.
func parseStatisticsAggregations(o *validate.Object) []string {
	if !o.Has("aggregations") || o.IsNull("aggregations") {
		return querybuilder.Aggregations
	}
	items, ok := o.List("aggregations")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		o.Fail("aggregations", "This list may not be empty.")
		return nil
	}
	var aggs []string
	seen := map[string]bool{}
	for i, it := range items {
		path := fmt.Sprintf("aggregations.%d", i)
		var a string
		if err := json.Unmarshal(it, &a); err != nil || string(it) == "null" {
			o.Fail(path, validate.MsgString)
			continue
		}
		if !querybuilder.IsStatisticsAggregation(a) {
			o.Fail(path, fmt.Sprintf("%q is not a valid choice.", a))
			continue
		}
		if !seen[a] {
			seen[a] = true
			aggs = append(aggs, a)
		}
	}
	return aggs
}

// parseStatisticsDecimalPlaces reads `decimalPlaces` (0–16); absent or null leaves the account's
// setting in force.
func parseStatisticsDecimalPlaces(o *validate.Object) *int {
	n, ok := o.NullableInt("decimalPlaces", 0, MaxDecimalPlaces)
	if !ok || n == nil {
		return nil
	}
	p := int(*n)
	return &p
}
