package analytics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/querybuilder"
)

// StatisticsRow is one row of the compiled statistics statement (column names as in
// querybuilder.Statistics). Pointers are NULL-able columns; columns of aggregations
// that were not requested are absent and stay nil.
type StatisticsRow struct {
	Ord               int64      `bun:"ord"`
	VariableID        *string    `bun:"variable_id"`
	VariableLabel     *string    `bun:"variable_label"`
	VariableName      *string    `bun:"variable_name"`
	VariableCreatedAt *time.Time `bun:"variable_created_at"`
	DeviceID          *string    `bun:"device_id"`
	DeviceLabel       *string    `bun:"device_label"`
	DeviceName        *string    `bun:"device_name"`
	DeviceCreatedAt   *time.Time `bun:"device_created_at"`
	HasData           bool       `bun:"has_data"`
	N                 int64      `bun:"n"`
	FirstValue        *float64   `bun:"first_value"`
	FirstTS           *time.Time `bun:"first_ts"`
	LastValue         *float64   `bun:"last_value"`
	LastTS            *time.Time `bun:"last_ts"`
	MinValue          *float64   `bun:"min_value"`
	MinTS             *time.Time `bun:"min_ts"`
	MaxValue          *float64   `bun:"max_value"`
	MaxTS             *time.Time `bun:"max_ts"`
	SumValue          *float64   `bun:"sum_value"`
	MeanValue         *float64   `bun:"mean_value"`
	StdValue          *float64   `bun:"std_value"`
	P25Value          *float64   `bun:"p25_value"`
	P50Value          *float64   `bun:"p50_value"`
	P75Value          *float64   `bun:"p75_value"`
}

// StatisticsAnswer is the E7 200 body.
type StatisticsAnswer struct {
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	Results []any `json:"results"`
}

// ResourceSummary is the device or variable summary of a statistics entry.
type ResourceSummary struct {
	URL       string `json:"url"`
	ID        string `json:"id"`
	Label     string `json:"label"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
}

type statisticsEntry struct {
	Device   ResourceSummary `json:"device"`
	Variable ResourceSummary `json:"variable"`
	Results  aggregateValues `json:"results"`
	Code     int             `json:"code"`
}

type statisticsMissing struct {
	Variable struct {
		ID string `json:"id"`
	} `json:"variable"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ShapeStatistics builds the E7 answer from the statement's rows (one per requested
// variable, in request order). places is the rounding in force: the request's
// decimalPlaces, else the account's, else nil for full precision.
func ShapeStatistics(rows []StatisticsRow, opts StatisticsOptions, places *int, baseURL string) (StatisticsAnswer, error) {
	if len(rows) != len(opts.Keys) {
		return StatisticsAnswer{}, fmt.Errorf("statistics: %d rows for %d variables", len(rows), len(opts.Keys))
	}
	ans := StatisticsAnswer{Start: opts.Start, End: opts.End, Results: make([]any, len(rows))}
	for i, r := range rows {
		if r.VariableID == nil {
			m := statisticsMissing{Code: 404, Message: "Variable not found."}
			m.Variable.ID = opts.Keys[i]
			ans.Results[i] = m
			continue
		}
		ans.Results[i] = statisticsEntry{
			Device: ResourceSummary{URL: baseURL + "/api/v2.0/devices/" + *r.DeviceID, ID: *r.DeviceID,
				Label: *r.DeviceLabel, Name: *r.DeviceName, CreatedAt: model.Timestamp(*r.DeviceCreatedAt)},
			Variable: ResourceSummary{URL: baseURL + "/api/v2.0/variables/" + *r.VariableID, ID: *r.VariableID,
				Label: *r.VariableLabel, Name: *r.VariableName, CreatedAt: model.Timestamp(*r.VariableCreatedAt)},
			Results: r.aggregates(opts.Aggregations, places),
			Code:    200,
		}
	}
	return ans, nil
}

// aggregates is the entry's results object: one key per requested aggregation, or
// none when the range holds no data.
func (r StatisticsRow) aggregates(names []string, decimalPlaces *int) aggregateValues {
	if !r.HasData {
		return nil
	}
	places := -1 // full precision
	if decimalPlaces != nil {
		places = *decimalPlaces
	}
	vals := make(aggregateValues, 0, len(names))
	for _, name := range names {
		v := aggregateValue{Name: name}
		switch name {
		case querybuilder.AggCount:
			v.Value = r.N
		case querybuilder.AggFirst:
			v.Value, v.Timestamp = roundPtr(r.FirstValue, places), ms(r.FirstTS)
		case querybuilder.AggLast:
			v.Value, v.Timestamp = roundPtr(r.LastValue, places), ms(r.LastTS)
		case querybuilder.AggMin:
			v.Value, v.Timestamp = roundPtr(r.MinValue, places), ms(r.MinTS)
		case querybuilder.AggMax:
			v.Value, v.Timestamp = roundPtr(r.MaxValue, places), ms(r.MaxTS)
		default:
			v.Value = roundPtr(r.plainValue(name), places)
		}
		vals = append(vals, v)
	}
	return vals
}

// plainValue is the column of an aggregation answered without a timestamp.
func (r StatisticsRow) plainValue(name string) *float64 {
	return map[string]*float64{
		querybuilder.AggSum: r.SumValue, querybuilder.AggMean: r.MeanValue, querybuilder.AggStd: r.StdValue,
		querybuilder.AggP25: r.P25Value, querybuilder.AggP50: r.P50Value, querybuilder.AggP75: r.P75Value,
	}[name]
}

// aggregateValue is {"value": ...} or {"value": ..., "timestamp": ms}.
type aggregateValue struct {
	Name      string
	Value     any    // *float64 (nil: null) or int64 (count)
	Timestamp *int64 // nil: no timestamp key
}

// aggregateValues renders as a JSON object keeping the requested order (a Go map
// would sort the keys).
type aggregateValues []aggregateValue

func (vs aggregateValues) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(v.Name) + `:{"value":`)
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, fmt.Errorf("aggregate %s: %w", v.Name, err)
		}
		b.Write(val)
		if v.Timestamp != nil {
			b.WriteString(`,"timestamp":` + strconv.FormatInt(*v.Timestamp, 10))
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func ms(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	m := t.UnixMilli()
	return &m
}
