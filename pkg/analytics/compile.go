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

// Bounds are what the service knows of the rollup tiers when it compiles a request
// (querybuilder.TierBounds). The zero Bounds knows of no limit, as in the psql form.
type Bounds struct {
	// Horizon is the raw horizon (API.md §16) for a range from start (nil: from the
	// first value), nil when the range reads nothing retention removed.
	Horizon func(start *time.Time) *time.Time
	// RollupsUntil: the rollup tiles are complete before it (nil: everywhere).
	RollupsUntil *time.Time
}

// at is b for a range from start; the horizon is asked only when ranged (an E8/E9
// request without a range reads each variable's last 100 raw values, never the tiers).
func (b Bounds) at(start *time.Time, ranged bool) querybuilder.TierBounds {
	t := querybuilder.TierBounds{RollupsUntil: b.RollupsUntil}
	if b.Horizon != nil && ranged {
		t.RawHorizon = b.Horizon(start)
	}
	return t
}

// CompileStatistics is E7's one path from a request body to its statement, for the
// handler, explain and `sensorapi compile` alike. Invalid input is ParseStatistics'
// error, unwrapped.
func CompileStatistics(body []byte, account int64, b Bounds) (querybuilder.Query, StatisticsOptions, error) {
	req, opts, err := ParseStatistics(body, account)
	if err != nil {
		return querybuilder.Query{}, opts, err
	}
	req.TierBounds = b.at(&req.Start, true)
	q, err := querybuilder.Statistics(req)
	if err != nil {
		return querybuilder.Query{}, opts, fmt.Errorf("compile statistics: %w", err)
	}
	return q, opts, nil
}

// CompileResample is E8's one path from a request body to its statement (see
// CompileStatistics).
func CompileResample(body []byte, account int64, b Bounds) (*Resample, querybuilder.Query, error) {
	req, err := ParseResample(body, account)
	if err != nil {
		return nil, querybuilder.Query{}, err
	}
	req.Query.TierBounds = b.at(req.Query.Start, req.Query.Start != nil || req.Query.End != nil)
	q, err := querybuilder.Resample(req.Query)
	if err != nil {
		return nil, querybuilder.Query{}, fmt.Errorf("compile resample: %w", err)
	}
	return req, q, nil
}

// CompileAggregation is E9's one path from a request body to its statement (see
// CompileStatistics).
func CompileAggregation(body []byte, account int64, b Bounds) (*Aggregation, querybuilder.Query, error) {
	req, err := ParseAggregation(body, account)
	if err != nil {
		return nil, querybuilder.Query{}, err
	}
	req.Query.TierBounds = b.at(req.Query.Start, req.Query.Start != nil || req.Query.End != nil)
	q, err := querybuilder.Aggregation(req.Query)
	if err != nil {
		return nil, querybuilder.Query{}, fmt.Errorf("compile aggregation: %w", err)
	}
	return req, q, nil
}

// compilers are the endpoints' compile paths without bounds, by endpoint name.
var compilers = map[string]func(body []byte, account int64) (querybuilder.Query, error){
	"statistics": func(body []byte, account int64) (querybuilder.Query, error) {
		q, _, err := CompileStatistics(body, account, Bounds{})
		return q, err
	},
	"resample": func(body []byte, account int64) (querybuilder.Query, error) {
		_, q, err := CompileResample(body, account, Bounds{})
		return q, err
	},
	"aggregation": func(body []byte, account int64) (querybuilder.Query, error) {
		_, q, err := CompileAggregation(body, account, Bounds{})
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
