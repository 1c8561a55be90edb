package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/openapi"
	"github.com/sensordata/sensorapi/pkg/store"
)

// healthz is 200 while the process runs; it tells the storage size, the write budget
// and the writes it refused (pkg/budget), which never make the process unhealthy.
func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok", "storage": s.Budget.Status()})
}

// readyz is 200 when the database answers and the schema is migrated; it lists the
// replicas' states, which never make the instance unready.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c, 2*time.Second)
	defer cancel()
	if err := store.Ready(ctx, s.DB); err != nil {
		s.Log.WarnContext(c, "not ready", "error", err.Error())
		fe := fault.FromDatabase(err)
		if fe == nil {
			fe = fault.Unavailable
		}
		s.writeError(c, apierr.Render(fe))
		return
	}
	body := gin.H{"status": "ready"}
	if st := s.Replicas.Status(); len(st) > 0 {
		body["replicas"] = st
	}
	c.JSON(http.StatusOK, body)
}

// openAPI serves docs/openapi.yaml as JSON, converted once when the engine is built.
func (s *Server) openAPI() handlerFunc {
	doc, err := openapi.JSON()
	return func(c *gin.Context) error {
		if err != nil {
			return err
		}
		c.Data(http.StatusOK, "application/json; charset=utf-8", doc)
		return nil
	}
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{})
}
