package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/querybuilder"
)

// resampleRoutes registers E8 and E9 (API.md §8, §9).
func (s *Server) resampleRoutes(v16 *gin.RouterGroup) {
	v16.POST("/data/stats/resample", wrap(s.resample))
	v16.POST("/data/stats/aggregation", wrap(s.aggregation))
}

func (s *Server) resample(c *gin.Context) error {
	body, err := readAnalyticsBody(c)
	if err != nil {
		return err
	}
	req, err := analytics.ParseResample(body, account(c).ID)
	if err != nil {
		return err
	}
	q, err := querybuilder.Resample(req.Query)
	if err != nil {
		return fmt.Errorf("compile resample: %w", err)
	}
	return s.runAnalytics(c, q, req.Query.VariableIDs, func(rows []analytics.Row) any { return req.Shape(rows) })
}

func (s *Server) aggregation(c *gin.Context) error {
	body, err := readAnalyticsBody(c)
	if err != nil {
		return err
	}
	req, err := analytics.ParseAggregation(body, account(c).ID)
	if err != nil {
		return err
	}
	q, err := querybuilder.Aggregation(req.Query)
	if err != nil {
		return fmt.Errorf("compile aggregation: %w", err)
	}
	return s.runAnalytics(c, q, req.Query.VariableIDs, func(rows []analytics.Row) any { return req.Shape(rows) })
}

// readAnalyticsBody is readJSON with E8/E9's detail-only parse errors (spec).
func readAnalyticsBody(c *gin.Context) ([]byte, error) {
	body, err := readJSON(c)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Code == 400001 {
		if f, ok := ae.Detail.(apierr.Fields); ok && len(f["body"]) > 0 {
			return nil, analytics.JSONParseError(strings.TrimPrefix(f["body"][0], "JSON parse error - "))
		}
	}
	return body, err
}

// runAnalytics answers explain=sql|analyze, or runs the statement and shapes its rows.
// Unknown ids come back from the statement itself as rows without a timestamp, so they
// cost no pre-check query (see querybuilder.Resample).
func (s *Server) runAnalytics(c *gin.Context, q querybuilder.Query, ids []string, shape func([]analytics.Row) any) error {
	switch c.Query("explain") {
	case "":
	case "sql":
		c.JSON(http.StatusOK, gin.H{"sql": q.SQL, "args": q.Args})
		return nil
	case "analyze":
		return s.explainAnalyze(c, q)
	default:
		return apierr.Invalid("explain", "Use explain=sql or explain=analyze.")
	}
	var rows []analytics.Row
	start := time.Now()
	err := s.DB.NewRaw(q.SQL, bunArgs(q.Args)...).Scan(c, &rows)
	s.Log.DebugContext(c, "analytics statement", "request_id", requestID(c), "sql", q.SQL,
		"duration_ms", float64(time.Since(start).Microseconds())/1000)
	if err != nil {
		return zoneError(err)
	}
	if err := analytics.CheckResolved(rows, ids); err != nil {
		return err
	}
	c.JSON(http.StatusOK, shape(rows))
	return nil
}

// explainAnalyze runs the statement under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
func (s *Server) explainAnalyze(c *gin.Context, q querybuilder.Query) error {
	var plan []byte
	err := s.DB.NewRaw("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q.SQL, bunArgs(q.Args)...).Scan(c, &plan)
	if err != nil {
		return zoneError(err)
	}
	var parsed []struct {
		ExecutionTime float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal(plan, &parsed); err != nil || len(parsed) == 0 {
		return fmt.Errorf("read EXPLAIN output: %w", err)
	}
	c.JSON(http.StatusOK, gin.H{"sql": q.SQL, "args": q.Args, "plan": json.RawMessage(plan),
		"execution_ms": parsed[0].ExecutionTime})
	return nil
}

// bunArgs wraps slices so bun binds them as PostgreSQL arrays.
func bunArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if ids, ok := a.([]string); ok {
			a = pgdialect.Array(ids)
		}
		out[i] = a
	}
	return out
}

// zoneError maps PostgreSQL refusing a zone name that Go's zone database knows (the two
// databases can differ by release) to a 400 on tz instead of a 500.
func zoneError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22023" && strings.Contains(pe.Message, "time zone") {
		return apierr.Invalid("tz", "This time zone is not known to the database.")
	}
	return fmt.Errorf("run analytics statement: %w", err)
}
