// Package ingest parses and validates dots (API.md §6) and writes them through one
// pipeline (pipeline.go): messages are validated alone, resolved to variable keys
// through caches (resolve.go) and committed together in batches through the values
// store (pkg/values), whose followers (follow.go: synthetic variables, events) are told
// about every write.
package ingest

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fastjson"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/pkg/values"
)

// Dot is one validated value. Target names the variable: a label (device routes), or
// a public id (collections); routes that name one variable leave it empty.
type Dot struct {
	Target  string
	Value   float64
	TS      int64 // ms since the epoch
	Context json.RawMessage
}

const (
	maxTimestamp   = values.MaxTimestamp
	maxContextSize = 8 << 10

	msgNumber    = "A finite number is required."
	msgTimestamp = "Enter an integer number of milliseconds between 0 and 253402300799999."
	msgContext   = "Expected an object of at most 8192 bytes serialized."
	msgDot       = "Expected a number, a dot object or a list of them."
)

// Parser turns request bodies into dots, collecting every problem with its path.
type Parser struct {
	Now  int64 // timestamp of dots that carry none (request's ?timestamp or arrival)
	Errs fault.Fields
}

// parsers are reused across requests: a parser keeps its value cache, and nothing of
// a parse outlives the request's Device/Values/Collection call (dots copy what they keep).
var parsers fastjson.ParserPool

// NewParser uses the request's timestamp query parameter when valid, else now.
func NewParser(queryTimestamp string, now time.Time) (*Parser, error) {
	p := &Parser{Now: now.UnixMilli(), Errs: fault.Fields{}}
	if queryTimestamp != "" {
		ts, err := strconv.ParseInt(queryTimestamp, 10, 64)
		if err != nil || ts < 0 || ts > maxTimestamp {
			return nil, fault.Invalid("timestamp", msgTimestamp)
		}
		p.Now = ts
	}
	return p, nil
}

// Device parses {VAR_LABEL: number | dot | [dots], ...}. Dots keep body order.
func (p *Parser) Device(body []byte) ([]Dot, error) {
	jp := parsers.Get()
	defer parsers.Put(jp)
	root, err := parse(jp, body)
	if err != nil {
		return nil, err
	}
	obj, err := root.Object()
	if err != nil {
		return nil, fault.ParseError("expected a JSON object of variable labels")
	}
	dots := make([]Dot, 0, 64)
	obj.Visit(func(key []byte, v *fastjson.Value) {
		label, ok := validate.Label(string(key))
		if !ok {
			p.Errs.Add(string(key), validate.MsgLabel)
			return
		}
		dots = p.dotOrList(dots, v, string(key), label)
	})
	return dots, p.Errs.Err()
}

// Values parses a dot or a list of dots for one variable.
func (p *Parser) Values(body []byte) ([]Dot, error) {
	jp := parsers.Get()
	defer parsers.Put(jp)
	root, err := parse(jp, body)
	if err != nil {
		return nil, err
	}
	dots := p.dotOrList(nil, root, "", "")
	return dots, p.Errs.Err()
}

// Collection parses [{"variable": ID, "value":.., "timestamp":.., "context":..}, ...].
func (p *Parser) Collection(body []byte) ([]Dot, error) {
	jp := parsers.Get()
	defer parsers.Put(jp)
	root, err := parse(jp, body)
	if err != nil {
		return nil, err
	}
	items, err := root.Array()
	if err != nil {
		return nil, fault.ParseError("expected a JSON list of dots")
	}
	dots := make([]Dot, 0, len(items))
	for i, it := range items {
		id := it.Get("variable")
		if id == nil || id.Type() != fastjson.TypeString {
			p.Errs.Add(strconv.Itoa(i)+".variable", "A variable id is required.")
			continue
		}
		if d, ok := p.dot(it, "", i); ok {
			d.Target = string(id.GetStringBytes())
			dots = append(dots, d)
		}
	}
	return dots, p.Errs.Err()
}

// parse reads the body in one pass (the HTTP layer has already checked it is valid
// JSON and UTF-8); the values it returns live until jp parses again.
func parse(jp *fastjson.Parser, body []byte) (*fastjson.Value, error) {
	v, err := jp.ParseBytes(body)
	if err != nil {
		return nil, fault.ParseError(err.Error())
	}
	return v, nil
}

func (p *Parser) dotOrList(dots []Dot, v *fastjson.Value, path, target string) []Dot {
	if v.Type() == fastjson.TypeArray {
		items, _ := v.Array()
		for i, it := range items {
			if d, ok := p.dot(it, path, i); ok {
				d.Target = target
				dots = append(dots, d)
			}
		}
		return dots
	}
	if d, ok := p.dot(v, path, -1); ok {
		d.Target = target
		dots = append(dots, d)
	}
	return dots
}

// dot parses a bare number (or boolean) or {"value", "timestamp", "context"}. Its
// path is path plus the list index idx (-1: none), spelled out only for a message.
func (p *Parser) dot(v *fastjson.Value, path string, idx int) (Dot, bool) {
	d := Dot{TS: p.Now}
	if v.Type() != fastjson.TypeObject {
		val, ok := number(v)
		if !ok {
			p.Errs.Add(where(path, idx, ""), msgDot)
		}
		d.Value = val
		return d, ok
	}
	var ok bool
	if d.Value, ok = number(v.Get("value")); !ok {
		p.Errs.Add(where(path, idx, "value"), msgNumber)
	}
	if ts := v.Get("timestamp"); ts != nil && ts.Type() != fastjson.TypeNull {
		var tsOK bool
		if d.TS, tsOK = timestamp(ts); !tsOK {
			p.Errs.Add(where(path, idx, "timestamp"), msgTimestamp)
			ok = false
		}
	}
	if c := v.Get("context"); c != nil && c.Type() != fastjson.TypeNull {
		var msg string
		if d.Context, msg = contextObject(c); msg != "" {
			p.Errs.Add(where(path, idx, "context"), msg)
			ok = false
		}
	}
	return d, ok
}

// number accepts a finite JSON number, or a boolean as 1/0.
func number(v *fastjson.Value) (float64, bool) {
	if v == nil {
		return 0, false
	}
	switch v.Type() {
	case fastjson.TypeTrue:
		return 1, true
	case fastjson.TypeFalse:
		return 0, true
	case fastjson.TypeNumber:
		f, err := v.Float64()
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false
}

// timestamp accepts an integral number of milliseconds in range (1.0e3 is 1000).
func timestamp(v *fastjson.Value) (int64, bool) {
	if v.Type() != fastjson.TypeNumber {
		return 0, false
	}
	if ts, err := v.Int64(); err == nil {
		return ts, ts >= 0 && ts <= maxTimestamp
	}
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || f < 0 || f > maxTimestamp {
		return 0, false
	}
	return int64(f), true
}

// contextObject returns the context compacted, or why it is refused: not an object
// of at most 8 KiB, or text that PostgreSQL's jsonb refuses (validate.JSONB), which
// would fail the write with a data exception. The compacted text keeps the body's own
// escapes (fastjson does not decode what it passes on), so it is exactly what the
// database receives: checked here, before the message can join a batch.
func contextObject(v *fastjson.Value) (json.RawMessage, string) {
	if v.Type() != fastjson.TypeObject {
		return nil, msgContext
	}
	b := v.MarshalTo(nil)
	if len(b) > maxContextSize {
		return nil, msgContext
	}
	if msg := validate.JSONB(b); msg != "" {
		return nil, msg
	}
	return b, ""
}

// where spells out the path of a field of a dot for its message.
func where(path string, idx int, field string) string {
	if idx >= 0 {
		path = join(path, strconv.Itoa(idx))
	}
	if field == "" {
		return orBody(path)
	}
	return join(path, field)
}

func join(path, elem string) string {
	if path == "" {
		return elem
	}
	return path + "." + elem
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}
