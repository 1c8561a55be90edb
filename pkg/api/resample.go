package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/fault"
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
	req, q, err := analytics.CompileResample(body, account(c).ID, s.bounds(c))
	if err != nil {
		return err
	}
	return s.runAnalytics(c, request{q, "resample", body}, req.Query.VariableIDs, req, req.Query.Zone)
}

func (s *Server) aggregation(c *gin.Context) error {
	body, err := readAnalyticsBody(c)
	if err != nil {
		return err
	}
	req, q, err := analytics.CompileAggregation(body, account(c).ID, s.bounds(c))
	if err != nil {
		return err
	}
	return s.runAnalytics(c, request{q, "aggregation", body}, req.Query.VariableIDs, req, req.Zone)
}

// answer is an E8 or E9 request's way from rows to its JSON body and its CSV table.
type answer interface {
	Shape(rows []analytics.Row) analytics.Response
	Table(rows []analytics.Row) analytics.Table
}

// readAnalyticsBody is readJSON with E8/E9's detail-only parse errors (spec).
func readAnalyticsBody(c *gin.Context) ([]byte, error) {
	body, err := readJSON(c)
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Kind == fault.KindInvalid {
		if f, ok := fe.Detail.(fault.Fields); ok && len(f["body"]) > 0 {
			return nil, analytics.JSONParseError(strings.TrimPrefix(f["body"][0], "JSON parse error - "))
		}
	}
	return body, err
}

// runAnalytics answers explain=sql|analyze, or runs the statement and shapes its rows
// as JSON or, with format=csv, as CSV (times in tz when timestamp_format=iso).
// Unknown ids come back from the statement itself as rows without a timestamp, so they
// cost no pre-check query (see querybuilder.Resample).
func (s *Server) runAnalytics(c *gin.Context, r request, ids []string, a answer, tz string) error {
	if done, err := s.explain(c, r); done {
		return zoneError(err)
	}
	f, err := readFormat(c)
	if err != nil {
		return err
	}
	var rows []analytics.Row
	if err := s.runCompiled(c, r.q, &rows); err != nil {
		return zoneError(err)
	}
	if err := analytics.CheckResolved(rows, ids); err != nil {
		return err
	}
	if f == nil {
		c.JSON(http.StatusOK, a.Shape(rows))
		return nil
	}
	zone, err := f.zone(tz)
	if err != nil {
		return err
	}
	out := &csvResponse{c: c, name: r.endpoint}
	err = writeTable(out, zone, a.Table(rows))
	if err != nil && out.started {
		s.cut(c, err)
	}
	return err
}

// zoneError maps PostgreSQL refusing a zone name that Go's zone database knows (the two
// databases can differ by release) to a 400 on tz instead of a 500.
func zoneError(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22023" && strings.Contains(pe.Message, "time zone") {
		return fault.Invalid("tz", "This time zone is not known to the database.")
	}
	return fmt.Errorf("run analytics statement: %w", err)
}
