package importer

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// TestCSVLines: records are named by the file line they start on (a quoted newline
// spans lines), the header's columns are found by name (any order, case, a BOM), and a
// header without value is refused on line 1.
func TestCSVLines(t *testing.T) {
	body := "\ufeffValue,created_at,TIMESTAMP,context\n1,x,1000,\"{\"\"a\"\": \"\"two\nlines\"\"}\"\n\n2,x,2000,\n"
	l, err := newCSV(strings.NewReader(body), false)
	if err != nil {
		t.Fatal(err)
	}
	if l.cols.value != 0 || l.cols.timestamp != 2 || l.cols.context != 3 || l.cols.device != -1 {
		t.Fatalf("columns %+v", l.cols)
	}
	var got []string
	for {
		r, err := l.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{r.field(l.cols.timestamp), r.field(l.cols.value), r.field(9)}, "|")+"@"+
			string(rune('0'+r.line)))
	}
	if strings.Join(got, " ") != "1000|1|@2 2000|2|@5" {
		t.Fatalf("records %q", got)
	}
	var fe *fault.Error
	if _, err := newCSV(strings.NewReader("timestamp,context\n"), false); !errors.As(err, &fe) || fe.Kind != fault.KindInvalid {
		t.Fatalf("header without value: %v", err)
	}
	if _, err := newCSV(strings.NewReader("timestamp,value\n"), true); !errors.As(err, &fe) {
		t.Fatalf("collection header without device, variable: %v", err)
	}
	bad, _ := newCSV(strings.NewReader("value\n\"1\n"), false)
	var le *lineError
	if _, err := bad.next(); !errors.As(err, &le) || le.line != 2 {
		t.Fatalf("open quote: %v", err)
	}
}

// TestNDJSONLines: blank lines count, a line past maxLine is named.
func TestNDJSONLines(t *testing.T) {
	l := newNDJSON(strings.NewReader("{\"value\": 1}\n\n  \r\n{\"value\": 2}\r\n" + strings.Repeat("x", maxLine+1) + "\n"))
	r, err := l.next()
	if err != nil || r.line != 1 || string(r.text) != `{"value": 1}` {
		t.Fatalf("first: %d %q %v", r.line, r.text, err)
	}
	if r, err = l.next(); err != nil || r.line != 4 || string(r.text) != `{"value": 2}` {
		t.Fatalf("second: %d %q %v", r.line, r.text, err)
	}
	var le *lineError
	if _, err := l.next(); !errors.As(err, &le) || le.line != 5 {
		t.Fatalf("long line: %v", err)
	}
}
