package importer

import (
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/pkg/values"
)

// maxProblems is how many fields a refused import's detail lists at most.
const maxProblems = 100

// slotKey is a collection's variable: device and variable labels.
type slotKey struct{ device, variable string }

// rowSource reads and validates the lines for the COPY (values.RowSource). After the
// first bad line it copies nothing more and reads on only to name up to maxProblems
// problems; Err then fails the COPY, and the transaction with it.
type rowSource struct {
	lines      lineReader
	cols       columns // a CSV body's
	parser     *ingest.Parser
	labels     bool // a collection: each line names its device and variable
	slots      map[slotKey]int
	order      []slotKey // slot → labels
	horizon    int64
	hasHorizon bool

	row values.StagedRow
	err error // the body could not be read
}

// Next reads up to the next good line.
func (s *rowSource) Next() bool {
	for s.err == nil && len(s.parser.Errs) < maxProblems {
		rec, err := s.lines.next()
		var le *lineError
		switch {
		case errors.Is(err, io.EOF):
			return false
		case errors.As(err, &le):
			s.parser.Errs.Add("line "+strconv.FormatInt(le.line, 10), le.msg)
			continue
		case err != nil:
			s.err = err
			return false
		}
		if s.parse(rec) && len(s.parser.Errs) == 0 {
			return true
		}
	}
	return false
}

// parse validates one record into s.row, noting its problems.
func (s *rowSource) parse(rec record) bool {
	path := "line " + strconv.FormatInt(rec.line, 10)
	before := len(s.parser.Errs)
	var d ingest.Dot
	var labels []string
	var ok bool
	switch {
	case rec.text != nil && s.labels:
		d, labels, ok = s.parser.LineJSON(rec.text, path, "device", "variable")
	case rec.text != nil:
		d, _, ok = s.parser.LineJSON(rec.text, path)
	default:
		l := s.cols
		d, ok = s.parser.LineFields(rec.field(l.timestamp), rec.field(l.value), rec.field(l.context), path)
		labels = []string{rec.field(l.device), rec.field(l.variable)}
	}
	if ok && s.hasHorizon && d.TS < s.horizon {
		s.parser.Errs.Add(path+".timestamp", ingest.MsgHorizon(s.horizon))
		ok = false
	}
	slot := 0
	if s.labels && len(labels) == 2 {
		var slotOK bool
		slot, slotOK = s.slot(labels[0], labels[1], path)
		ok = ok && slotOK
	}
	s.trim(before, path)
	s.row = values.StagedRow{Line: rec.line, Slot: slot, Row: values.Row{TS: d.TS, Value: d.Value, Context: d.Context}}
	return ok
}

// slot is the slot of a collection line's labels, validated.
func (s *rowSource) slot(device, variable, path string) (int, bool) {
	dev, devOK := validate.Label(device)
	v, varOK := validate.Label(variable)
	if !devOK {
		s.parser.Errs.Add(path+".device", validate.MsgLabel)
	}
	if !varOK {
		s.parser.Errs.Add(path+".variable", validate.MsgLabel)
	}
	if !devOK || !varOK {
		return 0, false
	}
	k := slotKey{dev, v}
	i, ok := s.slots[k]
	if !ok {
		i = len(s.order)
		s.slots[k] = i
		s.order = append(s.order, k)
	}
	return i, true
}

// trim drops the problems of the line at path past maxProblems (a line may add three).
func (s *rowSource) trim(before int, path string) {
	if len(s.parser.Errs) <= maxProblems || before >= maxProblems {
		return
	}
	for k := range s.parser.Errs {
		if len(s.parser.Errs) > maxProblems && (k == path || strings.HasPrefix(k, path+".")) {
			delete(s.parser.Errs, k)
		}
	}
}

func (s *rowSource) Row() values.StagedRow { return s.row }

// failed tells whether the body was bad: a line, or its reading.
func (s *rowSource) failed() bool { return s.err != nil || len(s.parser.Errs) > 0 }

// Err is why the rows ended early: the lines' problems (400), the body too large
// (413), or its reading cut.
func (s *rowSource) Err() error {
	switch {
	case errors.Is(s.err, fault.TooLarge):
		return fault.TooLarge
	case s.err != nil:
		return s.err
	}
	return s.parser.Errs.Err()
}
