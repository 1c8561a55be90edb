package validate

import (
	"encoding/json"
	"testing"

	"github.com/sensordata/sensorapi/pkg/fault"
)

func TestIntTypes(t *testing.T) {
	cases := []struct {
		raw string
		ok  bool
	}{{`3`, true}, {`3.0`, true}, {`1e1`, true}, {`"3"`, false}, {` "3"`, false}, {`2.5`, false}, {`null`, false}, {`true`, false}}
	for _, tc := range cases {
		errs := fault.Fields{}
		o := NewObject(map[string]json.RawMessage{"n": json.RawMessage(tc.raw)}, errs, "")
		if _, ok := o.Int("n", -100, 100); ok != tc.ok || (len(errs) == 0) != tc.ok {
			t.Errorf("Int(%s): ok %v errs %v, want ok %v", tc.raw, ok, errs, tc.ok)
		}
	}
}
