package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/querybuilder"
)

// request is an analytics request compiled: its statement, and the endpoint and body
// it came from (for the psql form of explain answers).
type request struct {
	q        querybuilder.Query
	endpoint string
	body     []byte
}

// explain answers ?explain=sql|analyze for a compiled analytics statement (API.md §10)
// and reports whether it did; without the parameter the caller runs the statement.
func (s *Server) explain(c *gin.Context, r request) (bool, error) {
	switch mode := c.Query("explain"); mode {
	case "":
		return false, nil
	case "sql", "analyze":
		return true, s.explainCompiled(c, r, mode == "analyze")
	default:
		return true, fault.Invalid("explain", fmt.Sprintf("%q is not a valid choice: use sql or analyze.", mode))
	}
}

// bounds are what compiling the request knows of the tiers: the raw horizon lookup
// (readHorizon: it also sets the X-Raw-Horizon header when the range reaches past it)
// and the rollup tiles' mark.
func (s *Server) bounds(c *gin.Context) analytics.Bounds {
	return analytics.Bounds{Horizon: func(start *time.Time) *time.Time { return s.readHorizon(c, start) },
		RollupsUntil: s.rollupsUntil(c)}
}

// runCompiled runs a compiled statement (on a replica when there are any, API.md §15),
// logging it with its duration at debug level.
func (s *Server) runCompiled(c *gin.Context, q querybuilder.Query, dest any) error {
	start := time.Now()
	err := s.Replicas.Read(c, func(db *store.DB) error {
		// a replica that failed half-way may have filled part of dest: start afresh
		reflect.ValueOf(dest).Elem().SetZero()
		return db.NewRaw(q.SQL, store.BindArgs(q.Args)...).Scan(c, dest)
	})
	if q.IEEE != nil && fault.IsOutOfRange(err) { // a sum past the largest double
		return s.runCompiled(c, *q.IEEE, dest)
	}
	s.Log.DebugContext(c, "compiled statement", "request_id", requestID(c), "sql", q.SQL,
		"duration_ms", float64(time.Since(start).Microseconds())/1000)
	return err
}

// explainCompiled answers {"sql","args","psql","tiers"} (psql: what `sensorapi compile`
// prints for the same request; tiers: which rollup tiers it reads and why), plus the EXPLAIN ANALYZE plan and the server's execution time
// when analyze is set.
func (s *Server) explainCompiled(c *gin.Context, r request, analyze bool) error {
	q := r.q
	psql, err := analytics.Psql(r.endpoint, r.body, account(c).Name)
	if err != nil {
		return fmt.Errorf("explain: psql form: %w", err)
	}
	out := gin.H{"sql": q.SQL, "args": q.Args, "psql": psql, "tiers": q.Notes}
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
