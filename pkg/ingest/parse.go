// Package ingest parses and validates dots (API.md §6) and writes them: one
// transaction per request, a handful of statements whatever the number of dots, last
// write wins per (variable, timestamp), lastValue/lastActivity kept in the same
// transaction.
package ingest

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/validate"
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
	maxTimestamp   = 253402300799999 // 9999-12-31T23:59:59.999Z
	maxContextSize = 8 << 10

	msgNumber    = "A finite number is required."
	msgTimestamp = "Enter an integer number of milliseconds between 0 and 253402300799999."
	msgContext   = "Expected an object of at most 8192 bytes serialized."
	msgDot       = "Expected a number, a dot object or a list of them."
)

// Parser turns request bodies into dots, collecting every problem with its path.
type Parser struct {
	Now  int64 // timestamp of dots that carry none (request's ?timestamp or arrival)
	Errs apierr.Fields
}

// NewParser uses the request's timestamp query parameter when valid, else now.
func NewParser(queryTimestamp string, now time.Time) (*Parser, error) {
	p := &Parser{Now: now.UnixMilli(), Errs: apierr.Fields{}}
	if queryTimestamp != "" {
		ts, err := strconv.ParseInt(queryTimestamp, 10, 64)
		if err != nil || ts < 0 || ts > maxTimestamp {
			return nil, apierr.Invalid("timestamp", msgTimestamp)
		}
		p.Now = ts
	}
	return p, nil
}

// Device parses {VAR_LABEL: number | dot | [dots], ...}. Dots keep body order.
func (p *Parser) Device(body []byte) ([]Dot, error) {
	var fields []field
	if err := decodeOrderedObject(body, &fields); err != nil {
		return nil, err
	}
	var dots []Dot
	for _, f := range fields {
		label, ok := validate.Label(f.key)
		if !ok {
			p.Errs.Add(f.key, validate.MsgLabel)
			continue
		}
		dots = append(dots, p.dotOrList(f.raw, f.key, label)...)
	}
	return dots, p.Errs.Err()
}

// Values parses a dot or a list of dots for one variable.
func (p *Parser) Values(body []byte) ([]Dot, error) {
	dots := p.dotOrList(body, "", "")
	return dots, p.Errs.Err()
}

// Collection parses [{"variable": ID, "value":.., "timestamp":.., "context":..}, ...].
func (p *Parser) Collection(body []byte) ([]Dot, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil || items == nil {
		return nil, apierr.ParseError("expected a JSON list of dots")
	}
	dots := make([]Dot, 0, len(items))
	for i, it := range items {
		path := strconv.Itoa(i)
		var obj struct {
			Variable *string `json:"variable"`
		}
		if json.Unmarshal(it, &obj) != nil || obj.Variable == nil {
			p.Errs.Add(path+".variable", "A variable id is required.")
			continue
		}
		if d, ok := p.dot(it, path); ok {
			d.Target = *obj.Variable
			dots = append(dots, d)
		}
	}
	return dots, p.Errs.Err()
}

func (p *Parser) dotOrList(raw json.RawMessage, path, target string) []Dot {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			p.Errs.Add(orBody(path), msgDot)
			return nil
		}
		dots := make([]Dot, 0, len(items))
		for i, it := range items {
			if d, ok := p.dot(it, join(path, strconv.Itoa(i))); ok {
				d.Target = target
				dots = append(dots, d)
			}
		}
		return dots
	}
	d, ok := p.dot(raw, path)
	if !ok {
		return nil
	}
	d.Target = target
	return []Dot{d}
}

// dot parses a bare number (or boolean) or {"value", "timestamp", "context"}.
func (p *Parser) dot(raw json.RawMessage, path string) (Dot, bool) {
	raw = bytes.TrimSpace(raw)
	d := Dot{TS: p.Now}
	if len(raw) == 0 || raw[0] != '{' {
		v, ok := number(raw)
		if !ok {
			p.Errs.Add(orBody(path), msgDot)
		}
		d.Value = v
		return d, ok
	}
	var obj struct {
		Value     json.RawMessage `json:"value"`
		Timestamp json.RawMessage `json:"timestamp"`
		Context   json.RawMessage `json:"context"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		p.Errs.Add(orBody(path), msgDot)
		return d, false
	}
	var ok bool
	if d.Value, ok = number(obj.Value); !ok {
		p.Errs.Add(join(path, "value"), msgNumber)
	}
	if obj.Timestamp != nil && !isNull(obj.Timestamp) {
		ts, tsOK := timestamp(obj.Timestamp)
		if !tsOK {
			p.Errs.Add(join(path, "timestamp"), msgTimestamp)
			ok = false
		}
		d.TS = ts
	}
	if obj.Context != nil && !isNull(obj.Context) {
		c, cOK := contextObject(obj.Context)
		if !cOK {
			p.Errs.Add(join(path, "context"), msgContext)
			ok = false
		}
		d.Context = c
	}
	return d, ok
}

// number accepts a finite JSON number, or a boolean as 1/0.
func number(raw json.RawMessage) (float64, bool) {
	switch string(raw) {
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

func timestamp(raw json.RawMessage) (int64, bool) {
	if ts, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return ts, ts >= 0 && ts <= maxTimestamp
	}
	f, ok := number(raw)
	if !ok || raw[0] == 't' || raw[0] == 'f' || f != math.Trunc(f) || f < 0 || f > maxTimestamp {
		return 0, false
	}
	return int64(f), true
}

func contextObject(raw json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil || b.Len() > maxContextSize {
		return nil, false
	}
	return b.Bytes(), true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

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

type field struct {
	key string
	raw json.RawMessage
}

// decodeOrderedObject reads a JSON object keeping key order (a later key wins in the
// dedup step, as the body reads).
func decodeOrderedObject(body []byte, out *[]field) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return apierr.ParseError("expected a JSON object of variable labels")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return apierr.ParseError(err.Error())
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return apierr.ParseError(err.Error())
		}
		*out = append(*out, field{key: t.(string), raw: raw})
	}
	return nil
}
