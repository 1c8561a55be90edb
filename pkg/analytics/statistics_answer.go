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
func ShapeStatistics(rows []querybuilder.StatisticsRow, opts StatisticsOptions, places *int, baseURL string) (StatisticsAnswer, error) {
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
		results, err := aggregates(&r, opts.Aggregations, places)
		if err != nil {
			return StatisticsAnswer{}, err
		}
		ans.Results[i] = statisticsEntry{
			Device: ResourceSummary{URL: baseURL + "/api/v2.0/devices/" + *r.DeviceID, ID: *r.DeviceID,
				Label: *r.DeviceLabel, Name: *r.DeviceName, CreatedAt: model.Timestamp(*r.DeviceCreatedAt)},
			Variable: ResourceSummary{URL: baseURL + "/api/v2.0/variables/" + *r.VariableID, ID: *r.VariableID,
				Label: *r.VariableLabel, Name: *r.VariableName, CreatedAt: model.Timestamp(*r.VariableCreatedAt)},
			Results: results,
			Code:    200,
		}
	}
	return ans, nil
}

// aggregates is the entry's results object: one key per requested aggregation, or
// none when the range holds no data.
func aggregates(r *querybuilder.StatisticsRow, names []string, decimalPlaces *int) (aggregateValues, error) {
	if !r.HasData {
		return nil, nil
	}
	places := -1 // full precision
	if decimalPlaces != nil {
		places = *decimalPlaces
	}
	vals := make(aggregateValues, 0, len(names))
	for _, name := range names {
		value, at, err := querybuilder.StatisticsAnswer(name, r)
		if err != nil {
			return nil, err
		}
		if f, ok := value.(*float64); ok {
			value = roundPtr(f, places)
		}
		vals = append(vals, aggregateValue{Name: name, Value: value, Timestamp: ms(at)})
	}
	return vals, nil
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
