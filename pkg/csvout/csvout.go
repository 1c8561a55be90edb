// Package csvout writes the service's CSV exports (API.md §21): RFC 4180 records
// through encoding/csv, numbers in the shortest form that reads back to the same
// float64, and times as epoch milliseconds or as ISO 8601 in a zone. It knows nothing
// of HTTP or of the database: pkg/api gives it a writer and the rows to write.
package csvout

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// ContentType is the media type of every export.
const ContentType = "text/csv; charset=utf-8"

// isoLayout is ISO 8601 with milliseconds and the zone's offset ("Z" in UTC).
const isoLayout = "2006-01-02T15:04:05.000Z07:00"

// Disposition is the Content-Disposition of an export saved as name.csv; name holds
// only characters of ids, labels and numbers, none of which needs escaping.
func Disposition(name string) string { return `attachment; filename="` + name + `.csv"` }

// Writer writes records; Flush sends what it holds on to the underlying writer.
type Writer struct {
	out  *bufio.Writer
	csv  *csv.Writer    // writes into out
	zone *time.Location // nil: times as epoch milliseconds
	rec  []string
	buf  bytes.Buffer // a context made compact
	line []byte       // a record Dot writes itself
}

// bufferSize is what the writer holds before it writes to w: large writes, few system
// calls and HTTP chunks (encoding/csv's own buffer is 4 KiB, net/http's 2 KiB).
const bufferSize = 64 << 10

// NewWriter writes to w, times as epoch milliseconds when zone is nil, else as ISO 8601
// with the offset of zone at each time.
func NewWriter(w io.Writer, zone *time.Location) *Writer {
	// csv.NewWriter keeps a *bufio.Writer of at least 4 KiB as its buffer: records
	// written by either go out in order
	out := bufio.NewWriterSize(w, bufferSize)
	return &Writer{out: out, csv: csv.NewWriter(out), zone: zone}
}

// Header writes the header row.
func (w *Writer) Header(columns ...string) error { return w.write(columns) }

// Dot writes a value of a value list: timestamp,value,context,created_at; context is
// JSON text, compact as in the JSON lists, {} when nil.
func (w *Writer) Dot(ts int64, value float64, context []byte, createdAt int64) error {
	if context == nil {
		return w.plainDot(ts, value, createdAt)
	}
	w.buf.Reset()
	if err := json.Compact(&w.buf, context); err != nil {
		return fmt.Errorf("csv: context: %w", err)
	}
	return w.write(append(w.rec[:0], w.Time(ts), Number(value), w.buf.String(), w.Time(createdAt)))
}

// plainDot is Dot without a context, the bytes encoding/csv would write (none of its
// fields needs quoting: numbers, times and {}) built without a string per field: a
// value list's export of 10 M dots spent a tenth of its time in those (pprof).
func (w *Writer) plainDot(ts int64, value float64, createdAt int64) error {
	b := append(w.appendTime(w.line[:0], ts), ',')
	b = append(AppendNumber(b, value), ",{},"...)
	w.line = append(w.appendTime(b, createdAt), '\n')
	if _, err := w.out.Write(w.line); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// Point writes a row of the long format: variable,timestamp,value (nil: empty cell).
func (w *Writer) Point(variable string, ts int64, value *float64) error {
	return w.write(append(w.rec[:0], variable, w.Time(ts), Nullable(value)))
}

// Row writes a row of the wide format: timestamp and one cell per column.
func (w *Writer) Row(ts int64, values []*float64) error {
	rec := append(w.rec[:0], w.Time(ts))
	for _, v := range values {
		rec = append(rec, Nullable(v))
	}
	return w.write(rec)
}

// Flush writes the buffered records to the underlying writer.
func (w *Writer) Flush() error {
	w.csv.Flush()
	if err := w.csv.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

func (w *Writer) write(rec []string) error {
	w.rec = rec
	if err := w.csv.Write(rec); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// Time is a data time (ms) as the writer writes it.
func (w *Writer) Time(ms int64) string { return string(w.appendTime(nil, ms)) }

// appendTime appends Time(ms) to b.
func (w *Writer) appendTime(b []byte, ms int64) []byte {
	if w.zone == nil {
		return strconv.AppendInt(b, ms, 10)
	}
	return time.UnixMilli(ms).In(w.zone).AppendFormat(b, isoLayout)
}

// Number is v in the shortest decimal form that parses back (strconv.ParseFloat,
// pandas, a spreadsheet) to the same float64, sign of zero included ("-0"): the
// digits of the JSON answers (encoding/json's choice of plain or exponent form), so
// an export says what the JSON says. NaN and ±Inf cannot reach it (ingestion refuses
// them and the statements answer null past the largest double); strconv would write
// them as NaN, +Inf and -Inf, which ParseFloat reads back too.
func Number(v float64) string { return string(AppendNumber(make([]byte, 0, 24), v)) }

// AppendNumber appends Number(v) to b.
func AppendNumber(b []byte, v float64) []byte {
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if format == 'e' { // 1e-07 → 1e-7, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Nullable is Number, or the empty cell for nil (JSON null).
func Nullable(v *float64) string {
	if v == nil {
		return ""
	}
	return Number(*v)
}
