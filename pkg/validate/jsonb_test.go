package validate

import (
	"strings"
	"testing"
)

// TestJSONB: the texts PostgreSQL's jsonb refuses in a UTF8 database are named, at any
// depth and in keys as in strings; what it accepts passes (pkg/api's
// TestContextPostgreSQLCannotStore checks the same cases against PostgreSQL itself).
func TestJSONB(t *testing.T) {
	for _, c := range []struct {
		text, want string
	}{
		{`{"k":"é €😀 日本"}`, ""},
		{`{"k":"\u00e9\ud83d\ude00\u65e5"}`, ""},
		{`{"k":"\\u0000 and \\ud800 are plain text here"}`, ""},
		{`{"k":"a\"\\\/\b\f\n\r\t\u0001"}`, ""},
		{`{"\u0000":1}`, MsgNULEscape},
		{`{"k":"x\u0000y"}`, MsgNULEscape},
		{`{"a":[{"b":{"c":["\u0000"]}}]}`, MsgNULEscape},
		{`{"k":"\ud800"}`, MsgLoneSurrogate},
		{`{"k":"\udc00"}`, MsgLoneSurrogate},
		{`{"k":"\ud800x"}`, MsgLoneSurrogate},
		{`{"k":"\ud800\n"}`, MsgLoneSurrogate},
		{`{"k":"\ud800\ud800"}`, MsgLoneSurrogate},
		{`{"k":"\ude00\ud83d"}`, MsgLoneSurrogate},
		{`{"\udfff":1}`, MsgLoneSurrogate},
		{`{"a":[{"b":{"c":"\uDBFF"}}]}`, MsgLoneSurrogate},
		{"{\"k\":\"\xff\"}", MsgUTF8},
		{"{\"k\":\"\xed\xa0\x80\"}", MsgUTF8}, // a surrogate encoded as UTF-8
		{`{"k":NaN}`, MsgJSONText},
		{"{\"k\":\"\x01\"}", MsgJSONText},
		{`{"k":"\q"}`, MsgJSONText},
		{`{"k":1.2.3}`, MsgJSONText},
		{`{"k":1e131071}`, ""},
		{`{"k":-9.99e131071}`, ""},
		{`{"k":0.0001e131075}`, ""},
		{`{"k":1e131072}`, MsgNumericRange},
		{`{"k":12e131071}`, MsgNumericRange},
		{`{"k":1E+131072}`, MsgNumericRange},
		{`{"k":1e-16383}`, ""},
		{`{"k":0.5e-16382}`, ""},
		{`{"k":1e-16384}`, MsgNumericRange},
		{`{"k":0.5e-16383}`, MsgNumericRange},
		{`{"k":0e-16384}`, MsgNumericRange},
		{`{"k":0e1073741823}`, ""},
		{`{"k":0e1073741824}`, MsgNumericRange},
		{`{"k":1e99999999999999999999999}`, MsgNumericRange},
		{`{"k":[1e-400,-0,0.0,123456789012345678901234567890]}`, ""},
		{`{"k":"` + strings.Repeat("0", 20000) + `"}`, ""},
	} {
		if got := JSONB([]byte(c.text)); got != c.want {
			t.Errorf("%.80s: %q, want %q", c.text, got, c.want)
		}
	}
}
