package analytics

import (
	"fmt"
	"math"
	"strings"

	"github.com/sensordata/sensorapi/querybuilder"
)

// accountPlaceholder stands for the account id while compiling for psql: the printed
// SQL looks the account up by name instead, so that it runs as is.
const accountPlaceholder = int64(math.MinInt64 + 727)

// compilers turn a request body into the one statement its endpoint runs.
var compilers = map[string]func(body []byte, account int64) (querybuilder.Query, error){
	"statistics": func(body []byte, account int64) (querybuilder.Query, error) {
		req, _, err := ParseStatistics(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Statistics(req)
	},
	"resample": func(body []byte, account int64) (querybuilder.Query, error) {
		req, err := ParseResample(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Resample(req.Query)
	},
	"aggregation": func(body []byte, account int64) (querybuilder.Query, error) {
		req, err := ParseAggregation(body, account)
		if err != nil {
			return querybuilder.Query{}, err
		}
		return querybuilder.Aggregation(req.Query)
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
