package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/fault"
)

// readJSON returns the request body after the checks every JSON route shares: media
// type (a missing Content-Type is accepted as JSON), size limit, non-empty, UTF-8,
// well-formed JSON.
func readJSON(c *gin.Context) ([]byte, error) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, apierr.UnsupportedMedia
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, apierr.TooLarge
	case err != nil:
		return nil, fault.ParseError("could not read the body")
	case len(body) == 0:
		return nil, fault.ParseError("the body is empty")
	case !utf8.Valid(body):
		return nil, fault.ParseError("the body is not valid UTF-8")
	case !json.Valid(body):
		return nil, fault.ParseError(syntaxReason(body))
	}
	return body, nil
}

// syntaxReason describes where the JSON breaks, as DRF's parse errors do.
func syntaxReason(body []byte) string {
	var v any
	err := json.Unmarshal(body, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// decodeObject reads a body that must be a JSON object into its raw fields.
func decodeObject(c *gin.Context) (map[string]json.RawMessage, error) {
	body, err := readJSON(c)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, fault.ParseError("expected a JSON object")
	}
	return m, nil
}

// baseURL is the absolute root that url fields are built from: SENSORAPI_PUBLIC_URL,
// else the request's scheme and Host.
func (s *Server) baseURL(c *gin.Context) string {
	if s.Config.PublicURL != "" {
		return s.Config.PublicURL
	}
	scheme := "http"
	if c.Request.TLS != nil || c.GetHeader("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}
