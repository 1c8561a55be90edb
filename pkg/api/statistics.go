package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/querybuilder"
)

// statistics is E7 (API.md §7): one compiled statement answers every variable and
// aggregation; explain=sql|analyze shows it instead (§10).
func (s *Server) statistics(c *gin.Context) error {
	body, err := readJSON(c)
	if err != nil {
		return err
	}
	acct := account(c)
	req, opts, err := analytics.ParseStatistics(body, acct.ID)
	if err != nil {
		return err
	}
	q, err := querybuilder.Statistics(req)
	if err != nil {
		return fmt.Errorf("compile statistics: %w", err)
	}
	switch mode := c.Query("explain"); mode {
	case "":
	case "sql", "analyze":
		return s.explainCompiled(c, q, mode == "analyze")
	default:
		return apierr.Invalid("explain", fmt.Sprintf("%q is not a valid choice: use sql or analyze.", mode))
	}
	var rows []analytics.StatisticsRow
	if err := s.runCompiled(c, q, &rows); err != nil {
		return fmt.Errorf("statistics: %w", err)
	}
	places := opts.DecimalPlaces
	if places == nil {
		places = acct.DecimalPlaces
	}
	ans, err := analytics.ShapeStatistics(rows, opts, places, s.baseURL(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, ans)
	return nil
}

// runCompiled runs a compiled statement, logging it with its duration at debug level.
func (s *Server) runCompiled(c *gin.Context, q querybuilder.Query, dest any) error {
	start := time.Now()
	err := s.DB.NewRaw(q.SQL, store.BindArgs(q.Args)...).Scan(c, dest)
	s.Log.DebugContext(c, "compiled statement", "request_id", requestID(c), "sql", q.SQL,
		"duration_ms", float64(time.Since(start).Microseconds())/1000)
	return err
}

// explainCompiled answers {"sql","args"}, plus the EXPLAIN ANALYZE plan and the server's
// execution time when analyze is set.
func (s *Server) explainCompiled(c *gin.Context, q querybuilder.Query, analyze bool) error {
	out := gin.H{"sql": q.SQL, "args": q.Args}
	if analyze {
		var plan string
		explained := querybuilder.Query{SQL: "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q.SQL, Args: q.Args}
		if err := s.runCompiled(c, explained, &plan); err != nil {
			return fmt.Errorf("explain analyze: %w", err)
		}
		var plans []json.RawMessage
		if err := json.Unmarshal([]byte(plan), &plans); err != nil || len(plans) != 1 {
			return fmt.Errorf("explain analyze: unexpected plan %.200q: %w", plan, err)
		}
		var timing struct {
			ExecutionTime float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal(plans[0], &timing); err != nil {
			return fmt.Errorf("explain analyze: read execution time: %w", err)
		}
		out["plan"] = plans[0]
		out["execution_ms"] = timing.ExecutionTime
	}
	c.JSON(http.StatusOK, out)
	return nil
}
