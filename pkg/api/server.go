// Package api is the HTTP layer: the Gin engine, its middleware and the handlers.
// Handlers parse, validate and authorize, then call the store or the query compiler;
// they return errors and never write error bodies themselves (see errors.go).
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/budget"
	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/console"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/synthetic"
)

// Server holds what the handlers share.
type Server struct {
	DB      *store.DB
	Config  config.Config
	Log     *slog.Logger
	Metrics *metrics.Metrics

	// The instance's parts the handlers use (pkg/server builds them; MQTT shares them).
	Tokens   *auth.Tokens
	Ingest   *ingest.Pipeline
	Replicas *store.Replicas
	Budget   *budget.Budget // the storage size and its write budget, for /healthz
	// Horizon is the raw horizon (API.md §16), read at most every server.HorizonTTL: writes
	// before it are refused, reads before it answer from the rollup tiers.
	Horizon *retention.Cache
	// Rollups is the rollup tiles' mark (values.RollupsUntil), read at most every
	// server.HorizonTTL: reads take tiles only before it, raw values after it.
	Rollups *cache.Value[time.Time]
	// Synthetic keeps synthetic variables up to date (API.md §17).
	Synthetic *synthetic.Upkeep
	// EventsChanged, when set, is called after an event was written, before the answer:
	// this instance's evaluator reads the watched variables again at once (the others
	// are told by notification, pkg/events).
	EventsChanged func(ctx context.Context, account int64)

	limits *limiters // per-token rate limits; nil when off
}

// Handler returns the service's http.Handler.
func (s *Server) Handler() http.Handler {
	s.limits = newLimiters(s.Config.RateLimit, s.Config.RateBurst)
	return trimTrailingSlash(s.engine())
}

// Routes lists the registered routes (method and Gin path), for the test that keeps
// docs/openapi.yaml complete. It builds a fresh engine, so it needs what Handler needs.
func (s *Server) Routes() gin.RoutesInfo { return s.engine().Routes() }

// engine builds the Gin engine with its middleware and every route.
func (s *Server) engine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.ContextWithFallback = true
	e.Use(s.requestID, s.recovery, s.observe, s.renderErrors, s.limitBody)
	e.NoRoute(wrap(func(c *gin.Context) error { return notFoundPath(c.Request.URL.Path) }))
	e.NoMethod(wrap(func(*gin.Context) error { return errMethodNotAllowed }))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(s.metricsHandler()))
	e.GET("/openapi.json", wrap(s.openAPI()))
	e.GET("/console", gin.WrapH(console.Handler()))
	e.GET("/console/*path", gin.WrapH(console.Handler()))

	v2 := e.Group("/api/v2.0", s.authenticate(false))
	v16 := e.Group("/api/v1.6", s.authenticate(false))
	s.routes(v2, v16)
	// The statistics endpoint answers 401s with a detail-only body (spec).
	s.statisticsRoutes(e.Group("/api/v2.0/data/statistics", s.authenticate(true)))
	return e
}

// trimTrailingSlash makes every route answer with and without a trailing slash, without
// a redirect (API.md): routes are registered without one.
func trimTrailingSlash(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			r.URL.Path = strings.TrimRight(p, "/")
			if r.URL.RawPath != "" {
				r.URL.RawPath = strings.TrimRight(r.URL.RawPath, "/")
			}
		}
		h.ServeHTTP(w, r)
	})
}
