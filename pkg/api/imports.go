package api

import (
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/importer"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// importRoutes are the history import's routes (API.md §21).
func (s *Server) importRoutes(v16 *gin.RouterGroup) {
	v16.POST("/variables/:id/values/import", wrap(s.postImport))
	v16.POST("/devices/:device/:variable/values/import", wrap(s.postImport))
	v16.POST("/collections/values/import", wrap(s.postImport))
}

// isImport tells whether a route is an import's, whose body limit is
// SENSORAPI_IMPORT_MAX_BYTES.
func isImport(route string) bool { return strings.HasSuffix(route, "/values/import") }

// postImport: a CSV or NDJSON body (gzip or not) → 200 {"rows": N, "variables": k}.
func (s *Server) postImport(c *gin.Context) error {
	arrived := time.Now()
	to, err := importTarget(c)
	if err != nil {
		return err
	}
	body, err := importBody(c)
	if err != nil {
		return err
	}
	body.Limit = s.Config.ImportMaxBytes
	p, err := ingest.NewParser(c.Query("timestamp"), arrived)
	if err != nil {
		return err
	}
	im := importer.Importer{Pipeline: s.Ingest}
	res, err := im.Import(c, account(c).ID, to, body, p)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, res)
	return nil
}

// importTarget is the route's target: a variable id, device and variable labels, or
// none (a collection).
func importTarget(c *gin.Context) (importer.Target, error) {
	if id := c.Param("id"); id != "" {
		if !validate.IsID(id) {
			return importer.Target{}, fault.NotFound("Variable '" + id + "' was not found.")
		}
		return importer.Target{VariableID: id}, nil
	}
	if c.Param("device") == "" {
		return importer.Target{}, nil
	}
	dev, err := deviceLabel(c)
	if err != nil {
		return importer.Target{}, err
	}
	v, ok := validate.Label(c.Param("variable"))
	if !ok {
		return importer.Target{}, fault.Invalid("variable", validate.MsgLabel)
	}
	return importer.Target{Device: dev, Variable: v}, nil
}

// importBody checks the media type (text/csv, application/x-ndjson) and encoding
// (gzip or none).
func importBody(c *gin.Context) (importer.Body, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || (mt != "text/csv" && mt != "application/x-ndjson") {
		return importer.Body{}, apierr.UnsupportedMedia
	}
	b := importer.Body{Reader: c.Request.Body, NDJSON: mt == "application/x-ndjson"}
	switch enc := strings.ToLower(strings.TrimSpace(c.GetHeader("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		b.Gzip = true
	default:
		return importer.Body{}, apierr.UnsupportedMedia
	}
	return b, nil
}
