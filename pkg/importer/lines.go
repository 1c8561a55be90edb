package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// A line reader yields an import body's records one by one: a CSV record's fields by
// column, or an NDJSON line's bytes, with the line the record starts on (the header
// is line 1). Nothing of a record outlives the next call.
type lineReader interface {
	// next returns the next record; io.EOF at the end. A record the format cannot
	// read is a *lineError; any other error is the body's reading (too large, cut).
	next() (record, error)
}

type record struct {
	line   int64
	fields []string // CSV: by column (columns)
	text   []byte   // NDJSON
}

// lineError is a line the format cannot read (a CSV quote left open, a line too long).
type lineError struct {
	line int64
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// columns are the positions of a CSV body's known columns (-1: absent).
type columns struct {
	timestamp, value, context, device, variable int
}

// csvLines reads RFC 4180 CSV; records may span lines (quoted newlines).
type csvLines struct {
	r    *csv.Reader
	cols columns
}

// newCSV reads the header: its columns by name (any order, case-insensitive, others
// ignored); value is required, and device and variable when labels is set.
func newCSV(body io.Reader, labels bool) (*csvLines, error) {
	r := csv.NewReader(body)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return nil, csvError(err, "the header")
	}
	c := columns{-1, -1, -1, -1, -1}
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))) // a spreadsheet's BOM
		for _, col := range []struct {
			name string
			pos  *int
		}{{"timestamp", &c.timestamp}, {"value", &c.value}, {"context", &c.context}, {"device", &c.device}, {"variable", &c.variable}} {
			if name == col.name && *col.pos < 0 {
				*col.pos = i
			}
		}
	}
	want := "timestamp,value[,context]"
	missing := c.value < 0
	if labels {
		want, missing = "device,variable,timestamp,value[,context]", missing || c.device < 0 || c.variable < 0
	}
	if missing {
		return nil, fault.Invalid("line 1", "The header must name the columns "+want+".")
	}
	return &csvLines{r: r, cols: c}, nil
}

func (l *csvLines) next() (record, error) {
	fields, err := l.r.Read()
	if err != nil {
		return record{}, csvError(err, "")
	}
	line, _ := l.r.FieldPos(0)
	return record{line: int64(line), fields: fields}, nil
}

// field is the record's field at column i ("" when absent or short).
func (r record) field(i int) string {
	if i < 0 || i >= len(r.fields) {
		return ""
	}
	return r.fields[i]
}

// csvError keeps a read error as it is and names the line of a CSV syntax error.
func csvError(err error, what string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &lineError{line: int64(pe.StartLine), msg: "CSV parse error - " + pe.Err.Error()}
	}
	if errors.Is(err, io.EOF) && what != "" {
		return fault.Invalid("line 1", "The body is empty: a header line is required.")
	}
	return err
}

// maxLine bounds an NDJSON line: a dot with the largest context and room to spare.
const maxLine = 1 << 20

// ndjsonLines reads one JSON value a line; blank lines are skipped (and counted).
type ndjsonLines struct {
	s    *bufio.Scanner
	line int64
}

func newNDJSON(body io.Reader) *ndjsonLines {
	s := bufio.NewScanner(body)
	s.Buffer(make([]byte, 64<<10), maxLine)
	return &ndjsonLines{s: s}
}

func (l *ndjsonLines) next() (record, error) {
	for l.s.Scan() {
		l.line++
		text := bytes.TrimSpace(l.s.Bytes())
		if len(text) > 0 {
			return record{line: l.line, text: text}, nil
		}
	}
	switch err := l.s.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return record{}, &lineError{line: l.line + 1, msg: fmt.Sprintf("A line may hold at most %d bytes.", maxLine)}
	case err != nil:
		return record{}, err
	}
	return record{}, io.EOF
}
