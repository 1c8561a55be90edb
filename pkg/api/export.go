package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/csvout"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/values"
)

// CSV exports (API.md §21): ?format=csv on value lists, E8 and E9.

// flushEvery is how many values of a list go out before the response is flushed.
const flushEvery = 4096

// csvFormat is what an export's query asks: ISO times (in the request's zone) instead
// of epoch milliseconds.
type csvFormat struct{ iso bool }

// readFormat reads ?format (json or csv) and ?timestamp_format (ms or iso); nil: JSON.
func readFormat(c *gin.Context) (*csvFormat, error) {
	errs := fault.Fields{}
	var f *csvFormat
	switch c.Query("format") {
	case "", "json":
	case "csv":
		f = &csvFormat{}
	default:
		errs.Add("format", `Choose one of json, csv.`)
	}
	switch c.Query("timestamp_format") {
	case "", "ms":
	case "iso":
		if f != nil {
			f.iso = true
		}
	default:
		errs.Add("timestamp_format", `Choose one of ms, iso.`)
	}
	return f, errs.Err()
}

// zone is where ISO times are written: the request's tz, nil for epoch milliseconds.
func (f *csvFormat) zone(tz string) (*time.Location, error) {
	if !f.iso {
		return nil, nil
	}
	if tz == "" {
		return time.UTC, nil
	}
	loc, ok := analytics.LoadZone(tz)
	if !ok {
		return nil, fault.Invalid("tz", analytics.ZoneMessage(tz))
	}
	return loc, nil
}

// csvResponse is an export's body. Its status and headers go out with the first byte,
// so that an error before it is still an ordinary JSON error (API.md §2).
type csvResponse struct {
	c       *gin.Context
	name    string
	started bool
}

func (r *csvResponse) Write(p []byte) (int, error) {
	if !r.started {
		r.started = true
		h := r.c.Writer.Header()
		h.Set("Content-Type", csvout.ContentType)
		h.Set("Content-Disposition", csvout.Disposition(r.name))
		r.c.Status(http.StatusOK)
	}
	return r.c.Writer.Write(p)
}

// flush sends what w holds to the client now.
func (r *csvResponse) flush(w *csvout.Writer) error {
	if err := w.Flush(); err != nil {
		return err
	}
	if r.started {
		r.c.Writer.Flush()
	}
	return nil
}

// cut ends an export that failed after its first byte: the status line is gone, so the
// connection is closed without the final chunk, and a client sees a broken transfer
// (curl: exit 18; pandas: an error) rather than a complete-looking short file.
func (s *Server) cut(c *gin.Context, err error) {
	s.Log.WarnContext(c, "export cut short", "request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
	panic(http.ErrAbortHandler)
}

// served marks an error after the first byte as answered, so that Replicas.Read does
// not run the export again on the primary into a response already begun.
func served(out *csvResponse, err error) error {
	if err != nil && out.started {
		return &fault.Error{Kind: fault.KindInternal, Err: err}
	}
	return err
}

// exportValues streams a value list as CSV: every value of [start, end], newest first,
// in one response (page and page_size do not apply), read page by page and written as
// read (values.Store.Export), so that memory stays flat whatever the range.
func (s *Server) exportValues(c *gin.Context, f *csvFormat) error {
	zone, err := f.zone(c.Query("tz"))
	if err != nil {
		return err
	}
	r, err := queryRange(c)
	if err != nil {
		return err
	}
	out := &csvResponse{c: c, name: exportName(c)}
	err = s.readValues(c, func(st *values.Store, key int64) error {
		w := csvout.NewWriter(out, zone)
		if err := w.Header("timestamp", "value", "context", "created_at"); err != nil {
			return err
		}
		n := 0
		err := st.Export(c, key, r, func(d values.ExportedDot) error {
			if err := w.Dot(d.Timestamp, d.Value, d.Context, d.CreatedAt); err != nil {
				return err
			}
			if n++; n%flushEvery == 0 {
				return out.flush(w)
			}
			return nil
		})
		if err == nil {
			err = out.flush(w)
		}
		return served(out, err)
	})
	if err != nil && out.started {
		s.cut(c, err)
	}
	return err
}

// exportName names a value list's file: values-<id>, or values-<device>-<variable>.
func exportName(c *gin.Context) string {
	if id := c.Param("id"); id != "" {
		return "values-" + id
	}
	return "values-" + c.Param("device") + "-" + c.Param("variable")
}

// writeTable writes an E8/E9 answer as CSV: wide (timestamp and one column per
// variable) for a joined E8, else long (variable,timestamp,value; an E9 join, one
// aggregate over all the variables, has an empty variable cell).
func writeTable(out *csvResponse, zone *time.Location, t analytics.Table) error {
	w := csvout.NewWriter(out, zone)
	if t.Wide {
		if err := w.Header(append([]string{"timestamp"}, t.IDs...)...); err != nil {
			return err
		}
		for _, row := range t.Joined {
			if err := w.Row(row.TS, row.Values); err != nil {
				return err
			}
		}
		return out.flush(w)
	}
	if err := w.Header("variable", "timestamp", "value"); err != nil {
		return err
	}
	for i, series := range t.Series {
		id := ""
		if !t.AllTogether {
			id = t.IDs[i]
		}
		for _, p := range series {
			if err := w.Point(id, p.TS, p.Value); err != nil {
				return err
			}
		}
	}
	return out.flush(w)
}
