// Package validate reads untrusted JSON objects field by field, collecting DRF-style
// messages (field path → messages) instead of stopping at the first problem, and holds
// the shared rules for labels, keys, tags and texts (API.md §3).
package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// DRF's wording, so clients written against the platform read familiar messages.
const (
	MsgRequired = "This field is required."
	MsgNull     = "This field may not be null."
	MsgString   = "Not a valid string."
	MsgBlank    = "This field may not be blank."
	MsgInteger  = "A valid integer is required."
	MsgNumber   = "A valid number is required."
	MsgBool     = "Must be a valid boolean."
	MsgObject   = "Expected an object."
	MsgList     = "Expected a list of items."
	// PostgreSQL text cannot hold NUL, so it is refused up front rather than failing
	// (or being altered) in the database.
	MsgNUL = "Null characters are not allowed."
)

// Object reads the fields of one JSON object. Field paths in messages are Prefix + name.
type Object struct {
	Raw    map[string]json.RawMessage
	Prefix string
	Errs   fault.Fields
}

// NewObject wraps raw fields; errs collects the messages (shared across nested objects).
func NewObject(raw map[string]json.RawMessage, errs fault.Fields, prefix string) *Object {
	return &Object{Raw: raw, Prefix: prefix, Errs: errs}
}

// Fail records a message for a field of this object.
func (o *Object) Fail(name, msg string) { o.Errs.Add(o.Prefix+name, msg) }

// Has tells whether the field was sent (null counts as sent).
func (o *Object) Has(name string) bool { _, ok := o.Raw[name]; return ok }

// IsNull tells whether the field was sent as null.
func (o *Object) IsNull(name string) bool {
	v, ok := o.Raw[name]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// Require records "required" for each missing field and reports whether all are there.
func (o *Object) Require(names ...string) bool {
	ok := true
	for _, n := range names {
		if !o.Has(n) {
			o.Fail(n, MsgRequired)
			ok = false
		}
	}
	return ok
}

// String reads a string of at most max runes (max 0: no limit). ok is false when the
// field is absent or invalid (then a message is recorded).
func (o *Object) String(name string, max int) (s string, ok bool) {
	v, present := o.Raw[name]
	if !present {
		return "", false
	}
	if o.IsNull(name) {
		o.Fail(name, MsgNull)
		return "", false
	}
	if err := json.Unmarshal(v, &s); err != nil {
		o.Fail(name, MsgString)
		return "", false
	}
	if strings.ContainsRune(s, 0) {
		o.Fail(name, MsgNUL)
		return "", false
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		o.Fail(name, fmt.Sprintf("Ensure this field has no more than %d characters.", max))
		return "", false
	}
	return s, true
}

// NullableString reads a string or null. ok is false when absent or invalid.
func (o *Object) NullableString(name string, max int) (s *string, ok bool) {
	if !o.Has(name) {
		return nil, false
	}
	if o.IsNull(name) {
		return nil, true
	}
	v, ok := o.String(name, max)
	if !ok {
		return nil, false
	}
	return &v, true
}

// Bool reads a JSON boolean.
func (o *Object) Bool(name string) (b bool, ok bool) {
	v, present := o.Raw[name]
	if !present {
		return false, false
	}
	if err := json.Unmarshal(v, &b); err != nil || o.IsNull(name) {
		o.Fail(name, MsgBool)
		return false, false
	}
	return b, true
}

// Int reads an integer in [min, max]. A number with a fraction is refused.
func (o *Object) Int(name string, min, max int64) (n int64, ok bool) {
	v, present := o.Raw[name]
	if !present {
		return 0, false
	}
	n, err := parseInt(v)
	if err != nil {
		o.Fail(name, MsgInteger)
		return 0, false
	}
	if n < min {
		o.Fail(name, fmt.Sprintf("Ensure this value is greater than or equal to %d.", min))
		return 0, false
	}
	if n > max {
		o.Fail(name, fmt.Sprintf("Ensure this value is less than or equal to %d.", max))
		return 0, false
	}
	return n, true
}

// NullableInt reads an integer in [min, max] or null.
func (o *Object) NullableInt(name string, min, max int64) (n *int64, ok bool) {
	if !o.Has(name) {
		return nil, false
	}
	if o.IsNull(name) {
		return nil, true
	}
	v, ok := o.Int(name, min, max)
	if !ok {
		return nil, false
	}
	return &v, true
}

// Object reads a nested object, returning a reader whose paths continue this one's.
func (o *Object) Object(name string) (*Object, bool) {
	m, ok := o.rawObject(name)
	if !ok {
		return nil, false
	}
	return NewObject(m, o.Errs, o.Prefix+name+"."), true
}

// List reads a JSON array into its raw items.
func (o *Object) List(name string) ([]json.RawMessage, bool) {
	v, present := o.Raw[name]
	if !present {
		return nil, false
	}
	var l []json.RawMessage
	if err := json.Unmarshal(v, &l); err != nil || l == nil {
		o.Fail(name, MsgList)
		return nil, false
	}
	return l, true
}

// Tags reads a list of at most 20 strings of at most 50 characters (API.md §3).
func (o *Object) Tags(name string) ([]string, bool) {
	items, ok := o.List(name)
	if !ok {
		return nil, false
	}
	if len(items) > 20 {
		o.Fail(name, "Ensure this field has no more than 20 elements.")
		return nil, false
	}
	tags := make([]string, 0, len(items))
	valid := true
	for i, it := range items {
		var s string
		switch {
		case json.Unmarshal(it, &s) != nil || bytes.Equal(bytes.TrimSpace(it), []byte("null")):
			o.Fail(fmt.Sprintf("%s.%d", name, i), MsgString)
			valid = false
		case strings.ContainsRune(s, 0):
			o.Fail(fmt.Sprintf("%s.%d", name, i), MsgNUL)
			valid = false
		case utf8.RuneCountInString(s) > 50:
			o.Fail(fmt.Sprintf("%s.%d", name, i), "Ensure this field has no more than 50 characters.")
			valid = false
		default:
			tags = append(tags, s)
		}
	}
	return tags, valid
}

// Properties reads a free-form object of at most 16 KiB serialized (API.md §3).
func (o *Object) Properties(name string) (json.RawMessage, bool) {
	m, ok := o.rawObject(name)
	if !ok {
		return nil, false
	}
	if hasNUL(m) {
		o.Fail(name, MsgNUL)
		return nil, false
	}
	compact, _ := json.Marshal(m)
	if len(compact) > 16<<10 {
		o.Fail(name, "Ensure this object is at most 16384 bytes serialized.")
		return nil, false
	}
	// the escapes are kept as sent: what jsonb refuses would fail the write (a 500)
	if msg := JSONB(compact); msg != "" {
		o.Fail(name, msg)
		return nil, false
	}
	return compact, true
}

// hasNUL tells whether a key or string anywhere in a JSON value holds a NUL.
func hasNUL(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.ContainsRune(t, 0)
	case json.RawMessage:
		var d any
		return json.Unmarshal(t, &d) == nil && hasNUL(d)
	case map[string]json.RawMessage:
		for k, e := range t {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range t {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// parseInt accepts a JSON integer (also written as 10.0 or 1e3) that fits an int64.
// A quoted number is refused: encoding/json would read "3" into a json.Number.
func parseInt(v json.RawMessage) (int64, error) {
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] == '"' {
		return 0, fmt.Errorf("not a JSON number: %s", t)
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return 0, err
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, fmt.Errorf("not an integer: %s", n)
	}
	return int64(f), nil
}

// Label reads a label field: lowercased, then checked against the label rule (API.md §3).
func (o *Object) Label(name string) (string, bool) {
	v, ok := o.String(name, 0)
	if !ok {
		return "", false
	}
	l, valid := Label(v)
	if !valid {
		o.Fail(name, MsgLabel)
		return "", false
	}
	return l, true
}

// rawObject reads a field that must be a JSON object into its raw members.
func (o *Object) rawObject(name string) (map[string]json.RawMessage, bool) {
	v, present := o.Raw[name]
	if !present {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		o.Fail(name, MsgObject)
		return nil, false
	}
	return m, true
}
