package ingest

import (
	"math"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"
)

// The lines of a history import (pkg/importer) are dots with the rules of posted ones:
// an NDJSON line is a dot object, a CSV line its fields as text. path names the line
// in problems ("line 12": "line 12.value").

// MsgLabelText is the message of a label field that is not a JSON string.
const MsgLabelText = "A label (a string) is required."

// LineJSON parses an NDJSON line: a dot object, and the string fields named by labels
// (a collection import's "device" and "variable"), returned in that order.
func (p *Parser) LineJSON(line []byte, path string, labels ...string) (Dot, []string, bool) {
	jp := parsers.Get()
	defer parsers.Put(jp)
	v, err := jp.ParseBytes(line)
	if err != nil {
		p.Errs.Add(path, "JSON parse error - "+err.Error())
		return Dot{}, nil, false
	}
	if v.Type() != fastjson.TypeObject {
		p.Errs.Add(path, "Expected a dot object.")
		return Dot{}, nil, false
	}
	d, ok := p.dot(v, path, -1)
	var out []string
	for _, l := range labels {
		f := v.Get(l)
		if f == nil || f.Type() != fastjson.TypeString {
			p.Errs.Add(join(path, l), MsgLabelText)
			ok = false
			continue
		}
		out = append(out, string(f.GetStringBytes()))
	}
	return d, out, ok
}

// LineFields parses a CSV line's timestamp (empty: the parser's Now), value and
// context (empty: none; else a JSON object) as a posted dot's fields.
func (p *Parser) LineFields(ts, value, context, path string) (Dot, bool) {
	d := Dot{TS: p.Now}
	var ok bool
	if d.Value, ok = textNumber(strings.TrimSpace(value)); !ok {
		p.Errs.Add(join(path, "value"), msgNumber)
	}
	if ts = strings.TrimSpace(ts); ts != "" {
		var tsOK bool
		if d.TS, tsOK = textTimestamp(ts); !tsOK {
			p.Errs.Add(join(path, "timestamp"), msgTimestamp)
			ok = false
		}
	}
	if context == "" {
		return d, ok
	}
	jp := parsers.Get()
	defer parsers.Put(jp)
	c, err := jp.Parse(context)
	if err != nil {
		p.Errs.Add(join(path, "context"), msgContext)
		return d, false
	}
	if c.Type() == fastjson.TypeNull {
		return d, ok
	}
	var msg string
	if d.Context, msg = contextObject(c); msg != "" {
		p.Errs.Add(join(path, "context"), msg)
		return d, false
	}
	return d, ok
}

// textNumber reads a finite number, or true/false as 1/0 (as number does in JSON).
func textNumber(s string) (float64, bool) {
	switch s {
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// textTimestamp reads milliseconds as timestamp does from a JSON number.
func textTimestamp(s string) (int64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0 && n <= maxTimestamp
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxTimestamp {
		return 0, false
	}
	return int64(f), true
}
