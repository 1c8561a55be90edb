package analytics

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/querybuilder"
)

// accountPlaceholder stands for the account id while compiling for psql: the printed
// SQL looks the account up by name instead, so that it runs as is.
const accountPlaceholder = int64(math.MinInt64 + 727)

// Horizon is the raw horizon (API.md §16) for a range from start (nil: from the first
// value), nil when the range reads nothing retention removed. A nil Horizon stands
// for none, as in the psql form.
type Horizon func(start *time.Time) *time.Time

// CompileStatistics is E7's one path from a request body to its statement, for the
// handler, explain and `sensorapi compile` alike. Invalid input is ParseStatistics'
// error, unwrapped.
func CompileStatistics(body []byte, account int64, horizon Horizon) (querybuilder.Query, StatisticsOptions, error) {
	req, opts, err := ParseStatistics(body, account)
	if err != nil {
		return querybuilder.Query{}, opts, err
	}
	if horizon != nil {
		req.RawHorizon = horizon(&req.Start)
	}
	q, err := querybuilder.Statistics(req)
	if err != nil {
		return querybuilder.Query{}, opts, fmt.Errorf("compile statistics: %w", err)
	}
	return q, opts, nil
}

// CompileResample is E8's one path from a request body to its statement (see
// CompileStatistics).
func CompileResample(body []byte, account int64, horizon Horizon) (*Resample, querybuilder.Query, error) {
	req, err := ParseResample(body, account)
	if err != nil {
		return nil, querybuilder.Query{}, err
	}
	req.Query.RawHorizon = rangeHorizon(horizon, req.Query.Start, req.Query.End)
	q, err := querybuilder.Resample(req.Query)
	if err != nil {
		return nil, querybuilder.Query{}, fmt.Errorf("compile resample: %w", err)
	}
	return req, q, nil
}

// CompileAggregation is E9's one path from a request body to its statement (see
// CompileStatistics).
func CompileAggregation(body []byte, account int64, horizon Horizon) (*Aggregation, querybuilder.Query, error) {
	req, err := ParseAggregation(body, account)
	if err != nil {
		return nil, querybuilder.Query{}, err
	}
	req.Query.RawHorizon = rangeHorizon(horizon, req.Query.Start, req.Query.End)
	q, err := querybuilder.Aggregation(req.Query)
	if err != nil {
		return nil, querybuilder.Query{}, fmt.Errorf("compile aggregation: %w", err)
	}
	return req, q, nil
}

// rangeHorizon asks for the horizon of an E8/E9 range only: a request without one
// reads each variable's last 100 raw values, never the tiers.
func rangeHorizon(horizon Horizon, start, end *time.Time) *time.Time {
	if horizon == nil || (start == nil && end == nil) {
		return nil
	}
	return horizon(start)
}

// compilers are the endpoints' compile paths without a horizon, by endpoint name.
var compilers = map[string]func(body []byte, account int64) (querybuilder.Query, error){
	"statistics": func(body []byte, account int64) (querybuilder.Query, error) {
		q, _, err := CompileStatistics(body, account, nil)
		return q, err
	},
	"resample": func(body []byte, account int64) (querybuilder.Query, error) {
		_, q, err := CompileResample(body, account, nil)
		return q, err
	},
	"aggregation": func(body []byte, account int64) (querybuilder.Query, error) {
		_, q, err := CompileAggregation(body, account, nil)
		return q, err
	},
}

// IsEndpoint tells whether endpoint is statistics, resample or aggregation.
func IsEndpoint(endpoint string) bool { _, ok := compilers[endpoint]; return ok }

// Psql is the statement an analytics endpoint runs for a request body, with its
// arguments written as literals and the account looked up by its name: ready to paste
// into psql (API.md §10). `sensorapi compile` prints it, and explain answers carry it.
func Psql(endpoint string, body []byte, accountName string) (string, error) {
	compile, ok := compilers[endpoint]
	if !ok {
		return "", fmt.Errorf("unknown endpoint %q", endpoint)
	}
	q, err := compile(body, accountPlaceholder)
	if err != nil {
		return "", err
	}
	name := "'" + strings.ReplaceAll(accountName, "'", "''") + "'"
	sql, err := q.InlineWith(func(arg any) (string, bool) {
		if id, ok := arg.(int64); ok && id == accountPlaceholder {
			return "(SELECT id FROM accounts WHERE name = " + name + ")", true
		}
		return "", false
	})
	if err != nil {
		return "", err
	}
	var notes strings.Builder
	for _, n := range q.Notes {
		notes.WriteString("-- " + n + "\n")
	}
	return notes.String() + sql + ";", nil
}
