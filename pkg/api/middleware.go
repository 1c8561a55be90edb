package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/auth"
)

const (
	ctxRequestID = "request_id"
	ctxAccess    = "access"
)

// requestID echoes the client's X-Request-Id (when sane) or makes one.
func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-Id")
	if id == "" || len(id) > 128 {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-Id", id)
	c.Next()
}

func requestID(c *gin.Context) string { return c.GetString(ctxRequestID) }

// recovery turns a panic into a 500 body naming only the request id.
func (s *Server) recovery(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			s.Log.ErrorContext(c, "panic", "request_id", requestID(c), "route", c.FullPath(), "panic", r)
			s.writeError(c, apierr.Internal(requestID(c)))
		}
	}()
	c.Next()
}

// observe logs each request and records its metrics. It logs the path, never the query
// string, which may hold a token.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	d := time.Since(start)
	s.Metrics.Requests.WithLabelValues(route, c.Request.Method, strconv.Itoa(status)).Inc()
	s.Metrics.Duration.WithLabelValues(route, c.Request.Method).Observe(d.Seconds())
	s.Log.InfoContext(c, "request", "request_id", requestID(c), "method", c.Request.Method,
		"path", c.Request.URL.Path, "route", route, "status", status,
		"duration_ms", float64(d.Microseconds())/1000, "bytes", c.Writer.Size())
}

// limitBody refuses bodies over the configured limit before reading them when the
// length is declared, and caps the reader otherwise.
// A history import's routes have their own limit (SENSORAPI_IMPORT_MAX_BYTES).
func (s *Server) limitBody(c *gin.Context) {
	limit := s.Config.MaxBodyBytes
	if isImport(c.FullPath()) {
		limit = s.Config.ImportMaxBytes
	}
	if c.Request.ContentLength > limit {
		s.writeError(c, apierr.TooLarge)
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	c.Next()
}

// authenticate resolves the token (header X-Auth-Token wins over query token) to its
// account. detailOnly renders 401s as {"detail": ...} (the statistics endpoint).
func (s *Server) authenticate(detailOnly bool) gin.HandlerFunc {
	fail := func(c *gin.Context, e *apierr.Error) {
		if detailOnly {
			e = e.DetailOnly()
		}
		s.writeError(c, e)
	}
	return func(c *gin.Context) {
		tok := c.GetHeader("X-Auth-Token")
		if tok == "" {
			tok = c.Query("token")
		}
		if tok == "" {
			fail(c, apierr.NoCredentials)
			return
		}
		access, err := s.Tokens.Authenticate(c, tok)
		switch {
		case errors.Is(err, auth.ErrBadToken):
			fail(c, apierr.BadCredentials)
			return
		case err != nil:
			s.writeError(c, s.toAPIError(c, err))
			return
		}
		if !s.rateLimit(c, tok) {
			return
		}
		if err := s.authorize(c, access); err != nil {
			s.writeError(c, s.toAPIError(c, err))
			return
		}
		c.Set(ctxAccess, access)
		c.Next()
	}
}

// authorize applies the route × scope table (pkg/auth/scopes.go): the one place where
// scopes are enforced over HTTP.
func (s *Server) authorize(c *gin.Context, a *auth.Access) error {
	switch a.Route(c.Request.Method, c.FullPath(), c.Param) {
	case auth.Allow:
		return nil
	case auth.AllowIfOwnVariable:
		own, err := auth.OwnsVariable(c, s.DB.Pool, a, c.Param("id"))
		if err != nil || own {
			return err
		}
	}
	return apierr.Forbidden
}

// account is the authenticated account of the request.
func account(c *gin.Context) *auth.Account { return &c.MustGet(ctxAccess).(*auth.Access).Account }
