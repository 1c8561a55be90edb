package api

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/analytics"
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
	q, opts, err := analytics.CompileStatistics(body, acct.ID, s.bounds(c))
	if err != nil {
		return err
	}
	if done, err := s.explain(c, request{q, "statistics", body}); done {
		return err
	}
	var rows []querybuilder.StatisticsRow
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
