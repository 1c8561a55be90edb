package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/fault"
)

var errMethodNotAllowed = apierr.MethodNotAllowed

// handlerFunc is a handler that returns its error for renderErrors.
type handlerFunc func(c *gin.Context) error

func wrap(h handlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			_ = c.Error(err)
			c.Abort()
		}
	}
}

func notFoundPath(path string) error {
	return fault.NotFound(fmt.Sprintf("The path '%s' was not found.", path))
}

// renderErrors turns the last error a handler returned into the JSON body of API.md §2.
func (s *Server) renderErrors(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 || c.Writer.Written() {
		return
	}
	s.writeError(c, s.toAPIError(c, c.Errors.Last().Err))
}

// toAPIError renders any error for HTTP through apierr's table: HTTP's own errors as
// they are, a fault (pkg/fault) by its kind, a fault of the database's environment
// (unreachable, restarting, read-only, out of disk, memory or connections) as an
// unavailable fault naming it, a statement timeout as its own kind, anything else as a
// 500 whose cause is logged but never sent.
func (s *Server) toAPIError(c *gin.Context, err error) *apierr.Error {
	var ae *apierr.Error
	var fe *fault.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe) && fe.Kind != fault.KindInternal:
		return apierr.Render(fe)
	case errors.As(err, &mbe):
		return apierr.TooLarge
	case c.Request.Context().Err() != nil:
		// the client went away (its transaction was rolled back): not a server fault
		s.Log.InfoContext(c, "client closed the request", "request_id", requestID(c), "route", c.FullPath())
		return apierr.ClientClosed
	case fault.IsTimeout(err) && c.Request.Context().Err() == nil:
		s.Log.WarnContext(c, "query timeout", "request_id", requestID(c), "route", c.FullPath())
		return apierr.QueryTimeout
	}
	if fe := fault.FromDatabase(err); fe != nil {
		s.Log.WarnContext(c, "database unavailable", "request_id", requestID(c), "cause", fe.Detail, "error", err.Error())
		return apierr.Render(fe)
	}
	s.Log.ErrorContext(c, "internal error", "request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
	return apierr.Internal(requestID(c))
}

func (s *Server) writeError(c *gin.Context, ae *apierr.Error) {
	for k, v := range ae.Header {
		c.Header(k, v)
	}
	c.AbortWithStatusJSON(ae.Status(), ae.Body())
}
