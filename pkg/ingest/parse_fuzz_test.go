package ingest

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// checkDots: whatever the body, accepted dots are finite, in range and small.
func checkDots(t *testing.T, dots []Dot, err error) {
	if err != nil {
		return
	}
	for _, d := range dots {
		if math.IsNaN(d.Value) || math.IsInf(d.Value, 0) {
			t.Fatalf("non-finite value accepted: %v", d.Value)
		}
		if d.TS < 0 || d.TS > maxTimestamp {
			t.Fatalf("timestamp out of range accepted: %d", d.TS)
		}
		if len(d.Context) > maxContextSize || (d.Context != nil && validate.JSONB(d.Context) != "") {
			t.Fatalf("bad context accepted: %q", d.Context)
		}
	}
}

func seedBodies(f *testing.F) {
	for _, s := range []string{`{"temperature": 1}`, `{"t": {"value": 1, "timestamp": 1, "context": {"a": 1}}}`,
		`{"t": [1, 2, {"value": true}]}`, `[{"variable": "0123456789abcdef01234567", "value": 1}]`, `{"value": 1e308}`,
		`[{"value": -0, "timestamp": 253402300799999}]`, `{"T-1": [{"value": "x"}]}`, `{"a":{"value":1,"timestamp":1.0e3}}`,
		`{"": 1}`, `{"a": [[1]]}`, `null`, `[]`, `{}`, `1`, `"1"`, `{"t":{"value":1,"context":{"k":"x\u0000y"}}}`,
		`{"t":{"value":1,"context":{"\ud800":[1e131072]}}}`, `{"t":{"value":1,"context":{"k":NaN,"q":"\q"}}}`} {
		f.Add([]byte(s))
	}
}

func newTestParser() *Parser {
	p, _ := NewParser("", time.UnixMilli(1_700_000_000_000))
	return p
}

// FuzzParseDevice takes any body: MQTT payloads reach the parser unchecked (the HTTP
// layer answers invalid JSON before parsing dots).
func FuzzParseDevice(f *testing.F) {
	seedBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		dots, err := newTestParser().Device(body)
		checkDots(t, dots, err)
	})
}

func FuzzParseValues(f *testing.F) {
	seedBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		dots, err := newTestParser().Values(body)
		checkDots(t, dots, err)
	})
}

func FuzzParseCollection(f *testing.F) {
	seedBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		dots, err := newTestParser().Collection(body)
		checkDots(t, dots, err)
	})
}
