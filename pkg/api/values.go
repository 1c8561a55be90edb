package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// valueRoutes are the v1.6 value routes (API.md §6).
func (s *Server) valueRoutes(v16 *gin.RouterGroup) {
	v16.POST("/devices/:device", wrap(s.postDevice))
	v16.POST("/devices/:device/:variable/values", wrap(s.postVariableValues))
	v16.GET("/devices/:device/:variable/values", wrap(s.getValues))
	v16.GET("/devices/:device/:variable/lv", wrap(s.getLastValue))
	v16.POST("/variables/:id/values", wrap(s.postVariableValues))
	v16.GET("/variables/:id/values", wrap(s.getValues))
	v16.DELETE("/variables/:id/values/:start/:end", wrap(s.deleteValues))
	v16.GET("/variables/:id/statistics/:agg/:start/:end", wrap(s.getStatistic))
	v16.POST("/collections/values", wrap(s.postCollection))
}

// readValues runs a value read (lists, lv, v1.6 statistics) on a replica when there
// are any (API.md §15), with the store on that replica's pool.
func (s *Server) readValues(c *gin.Context, read func(st *values.Store, key int64) error) error {
	return s.Replicas.Read(c, func(db *store.DB) error {
		st := &values.Store{Pool: db.Pool}
		key, err := pathVariable(c, st)
		if err != nil {
			return err
		}
		return read(st, key)
	})
}

// parser reads the body and prepares a dot parser; dots without a timestamp get the
// request's ?timestamp, else the arrival time.
func parser(c *gin.Context) ([]byte, *ingest.Parser, error) {
	arrived := time.Now()
	body, err := readJSON(c)
	if err != nil {
		return nil, nil, err
	}
	p, err := ingest.NewParser(c.Query("timestamp"), arrived)
	return body, p, err
}

func deviceLabel(c *gin.Context) (string, error) {
	l, ok := validate.Label(c.Param("device"))
	if !ok {
		return "", fault.Invalid("device", validate.MsgLabel)
	}
	return l, nil
}

// postDevice: {VAR_LABEL: number | dot | [dots]} → 200 {VAR_LABEL: [{"status_code":201}...]}.
func (s *Server) postDevice(c *gin.Context) error {
	label, err := deviceLabel(c)
	if err != nil {
		return err
	}
	body, p, err := parser(c)
	if err != nil {
		return err
	}
	dots, err := p.Device(body)
	if err != nil {
		return err
	}
	if err := s.Ingest.ToDevice(c, account(c).ID, label, dots); err != nil {
		return err
	}
	out := map[string][]gin.H{}
	for _, d := range dots {
		out[d.Target] = append(out[d.Target], created)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

var created = gin.H{"status_code": 201}

// createdList answers n dots written: one {"status_code":201} each, in order. Written
// as bytes: encoding a bulk request's thousand maps through encoding/json took a tenth
// of the server's CPU under make bench-bulkold (pprof).
func createdList(c *gin.Context, n int) {
	const item = `{"status_code":201}`
	b := make([]byte, 0, 2+n*(len(item)+1))
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, item...)
	}
	c.Data(http.StatusCreated, "application/json; charset=utf-8", append(b, ']'))
}

// postVariableValues: a dot → 201 the stored dot; [dots] → 201 [{"status_code":201}...].
func (s *Server) postVariableValues(c *gin.Context) error {
	body, p, err := parser(c)
	if err != nil {
		return err
	}
	dots, err := p.Values(body)
	if err != nil {
		return err
	}
	if id := c.Param("id"); id != "" {
		if !validate.IsID(id) {
			return fault.NotFound("Variable '" + id + "' was not found.")
		}
		err = s.Ingest.ToVariableID(c, account(c).ID, id, dots)
	} else {
		err = s.postToLabels(c, dots)
	}
	if err != nil {
		return err
	}
	if isList(body) {
		createdList(c, len(dots))
		return nil
	}
	d := dots[0]
	if d.Context == nil {
		d.Context = json.RawMessage(`{}`)
	}
	c.JSON(http.StatusCreated, values.StoredDot{Value: d.Value, Timestamp: d.TS, Context: d.Context, CreatedAt: time.Now().UnixMilli()})
	return nil
}

// postToLabels writes to /devices/<dev>/<var>/values, creating both as needed.
func (s *Server) postToLabels(c *gin.Context, dots []ingest.Dot) error {
	dev, err := deviceLabel(c)
	if err != nil {
		return err
	}
	v, ok := validate.Label(c.Param("variable"))
	if !ok {
		return fault.Invalid("variable", validate.MsgLabel)
	}
	for i := range dots {
		dots[i].Target = v
	}
	return s.Ingest.ToDevice(c, account(c).ID, dev, dots)
}

func isList(body []byte) bool {
	for _, b := range body {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return true
		}
		return false
	}
	return false
}

// postCollection: [{"variable": ID, "value", "timestamp", "context"}] → 201 statuses.
func (s *Server) postCollection(c *gin.Context) error {
	body, p, err := parser(c)
	if err != nil {
		return err
	}
	dots, err := p.Collection(body)
	if err != nil {
		return err
	}
	if err := s.Ingest.ToCollection(c, account(c).ID, dots); err != nil {
		return err
	}
	createdList(c, len(dots))
	return nil
}

// pathVariable resolves the variable named by the path (id, or device and variable
// labels) to its key.
func pathVariable(c *gin.Context, st *values.Store) (int64, error) {
	v := values.Variable{ID: c.Param("id")}
	valid := validate.IsID(v.ID)
	if v.ID == "" {
		var devOK, varOK bool
		v.DeviceLabel, devOK = validate.Label(c.Param("device"))
		v.Label, varOK = validate.Label(c.Param("variable"))
		valid = devOK && varOK
	}
	if !valid { // it can name nothing: answer without asking the database
		return 0, fault.NotFound(fmt.Sprintf("Variable '%s' was not found.", v))
	}
	return st.Resolve(c, account(c).ID, v)
}

// getValues: newest first, start/end inclusive, page/page_size (default 100, max 10000);
// with format=csv the whole range as one CSV stream (exportValues).
func (s *Server) getValues(c *gin.Context) error {
	if f, err := readFormat(c); err != nil || f != nil {
		if err != nil {
			return err
		}
		return s.exportValues(c, f)
	}
	page, size := intParam(c, "page", 1, 1, 1<<31), intParam(c, "page_size", 100, 1, 10000)
	var dots []values.StoredDot
	var more bool
	err := s.readValues(c, func(st *values.Store, key int64) error {
		r, err := queryRange(c)
		if err != nil {
			return err
		}
		dots, more, err = st.Page(c, key, r, (page-1)*size, size)
		return err
	})
	if err != nil {
		return err
	}
	var next, prev *string
	if more {
		next = s.pageLink(c, page+1)
	}
	if page > 1 {
		prev = s.pageLink(c, page-1)
	}
	if dots == nil {
		dots = []values.StoredDot{}
	}
	// count is true, as in the platform: counting a long series is not free
	c.JSON(http.StatusOK, gin.H{"count": true, "next": next, "previous": prev, "results": dots})
	return nil
}

// getLastValue answers the newest value as a bare number (null without values).
func (s *Server) getLastValue(c *gin.Context) error {
	var d *values.StoredDot
	err := s.readValues(c, func(st *values.Store, key int64) (err error) {
		d, err = st.Last(c, key)
		return err
	})
	if err != nil {
		return err
	}
	if d == nil {
		c.JSON(http.StatusOK, nil)
		return nil
	}
	c.JSON(http.StatusOK, d.Value)
	return nil
}

func (s *Server) deleteValues(c *gin.Context) error {
	st := &values.Store{Pool: s.DB.Pool} // a write: the primary
	key, err := pathVariable(c, st)
	if err != nil {
		return err
	}
	r, err := pathRange(c)
	if err != nil {
		return err
	}
	if err := s.Ingest.Delete(c, key, r); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// getStatistic: {AGG: number} over an inclusive range.
func (s *Server) getStatistic(c *gin.Context) error {
	agg := c.Param("agg")
	if !querybuilder.IsVariableStatistic(agg) {
		return fault.Invalid("agg", "Choose one of "+strings.Join(querybuilder.VariableStatistics, ", ")+".")
	}
	var v *float64
	err := s.readValues(c, func(st *values.Store, key int64) error {
		r, err := pathRange(c)
		if err != nil {
			return err
		}
		start := time.UnixMilli(*r.Start).UTC()
		v, err = st.Statistic(c, key, agg, r, querybuilder.TierBounds{RawHorizon: s.readHorizon(c, &start),
			RollupsUntil: s.rollupsUntil(c)})
		return err
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{agg: v})
	return nil
}

func queryRange(c *gin.Context) (values.Range, error) {
	return parseRange(c.Query("start"), c.Query("end"), true)
}

func pathRange(c *gin.Context) (values.Range, error) {
	return parseRange(c.Param("start"), c.Param("end"), false)
}

func parseRange(start, end string, optional bool) (values.Range, error) {
	var r values.Range
	errs := fault.Fields{}
	for _, b := range []struct {
		name, text string
		dst        **int64
	}{{"start", start, &r.Start}, {"end", end, &r.End}} {
		if b.text == "" && optional {
			continue
		}
		n, err := strconv.ParseInt(b.text, 10, 64)
		if err != nil || n < 0 {
			errs.Add(b.name, "Enter an integer number of milliseconds since the epoch.")
			continue
		}
		*b.dst = &n
	}
	if r.Start != nil && r.End != nil && *r.End < *r.Start {
		errs.Add("end", "Must be greater than or equal to start.")
	}
	return r, errs.Err()
}

func intParam(c *gin.Context, name string, def, lo, hi int) int {
	n, err := strconv.Atoi(c.Query(name))
	if err != nil || n < lo {
		return def
	}
	return min(n, hi)
}
