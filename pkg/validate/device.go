package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

var (
	hexColorRe = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)
	rgbRe      = regexp.MustCompile(`^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$`)
	rgbaRe     = regexp.MustCompile(`^rgba\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(0|1|0?\.\d+|1\.0*)\s*\)$`)
)

var (
	locationTypes = []string{"manual", "specified", "auto"}
	configTypes   = []string{"boolean", "date", "list", "text", "number"}
)

// MsgColor explains the _color rule.
const MsgColor = "Enter a valid colour: #rgb, #rrggbb, rgb(r,g,b) or rgba(r,g,b,a)."

// DeviceProperties reads a Device's properties (API.md §5): only the documented
// underscore attributes, each checked. A null attribute is kept as null: on PATCH it
// removes that attribute, on create it is dropped.
func (o *Object) DeviceProperties(name string) (map[string]json.RawMessage, bool) {
	if _, ok := o.Properties(name); !ok {
		return nil, false
	}
	p, _ := o.Object(name)
	before := len(o.Errs)
	out := make(map[string]json.RawMessage, len(p.Raw))
	for attr := range p.Raw {
		if p.IsNull(attr) {
			out[attr] = nil
			continue
		}
		if v, ok := p.deviceAttribute(attr); ok {
			out[attr] = v
		}
	}
	return out, len(o.Errs) == before
}

// deviceAttribute checks one attribute and returns its normalized JSON.
func (p *Object) deviceAttribute(attr string) (json.RawMessage, bool) {
	var v any
	var ok bool
	switch attr {
	case "_icon":
		v, ok = p.String(attr, 0)
	case "_color":
		v, ok = p.color(attr)
	case "_location_type":
		v, ok = p.Choice(attr, locationTypes)
	case "_location_variable":
		v, ok = p.label(attr)
	case "_location_fixed":
		v, ok = p.location(attr)
	case "_config":
		v, ok = p.config(attr)
	default:
		p.Fail(attr, "Unknown attribute; allowed: _icon, _color, _location_type, _location_variable, _location_fixed, _config.")
		return nil, false
	}
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(v)
	return b, err == nil
}

// Choice reads a string that must be one of choices.
func (o *Object) Choice(name string, choices []string) (string, bool) {
	s, ok := o.String(name, 0)
	if !ok {
		return "", false
	}
	for _, c := range choices {
		if s == c {
			return s, true
		}
	}
	o.Fail(name, fmt.Sprintf("\"%s\" is not a valid choice.", s))
	return "", false
}

// Number reads a JSON number in [min, max], keeping its decimal text.
func (o *Object) Number(name string, min, max float64) (json.Number, bool) {
	v, present := o.Raw[name]
	if !present {
		return "", false
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	// json.Number would also take a quoted number; only a bare one is a number
	if err := d.Decode(&n); err != nil || n == "" || bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) {
		o.Fail(name, MsgNumber)
		return "", false
	}
	f, err := n.Float64()
	switch {
	case err != nil:
		o.Fail(name, MsgNumber)
		return "", false
	case f < min:
		o.Fail(name, fmt.Sprintf("Ensure this value is greater than or equal to %g.", min))
		return "", false
	case f > max:
		o.Fail(name, fmt.Sprintf("Ensure this value is less than or equal to %g.", max))
		return "", false
	}
	return n, true
}

func (o *Object) color(name string) (string, bool) {
	s, ok := o.String(name, 0)
	if !ok {
		return "", false
	}
	m := rgbRe.FindStringSubmatch(s)
	if m == nil {
		m = rgbaRe.FindStringSubmatch(s)
	}
	if hexColorRe.MatchString(s) || (m != nil && bytesInRange(m[1:4])) {
		return s, true
	}
	o.Fail(name, MsgColor)
	return "", false
}

func bytesInRange(parts []string) bool {
	for _, p := range parts {
		if n, err := strconv.Atoi(p); err != nil || n > 255 {
			return false
		}
	}
	return true
}

func (o *Object) label(name string) (string, bool) {
	s, ok := o.String(name, 0)
	if !ok {
		return "", false
	}
	l, valid := Label(s)
	if !valid {
		o.Fail(name, MsgLabel)
		return "", false
	}
	return l, true
}

func (o *Object) location(name string) (map[string]json.Number, bool) {
	loc, ok := o.Object(name)
	if !ok {
		return nil, false
	}
	before := len(o.Errs)
	loc.Require("lat", "lng")
	lat, _ := loc.Number("lat", -90, 90)
	lng, _ := loc.Number("lng", -180, 180)
	loc.rejectOthers("lat", "lng")
	return map[string]json.Number{"lat": lat, "lng": lng}, len(o.Errs) == before
}

// config reads _config: an object of entries keyed by property key.
func (o *Object) config(name string) (map[string]map[string]any, bool) {
	cfg, ok := o.Object(name)
	if !ok {
		return nil, false
	}
	before := len(o.Errs)
	out := make(map[string]map[string]any, len(cfg.Raw))
	for key := range cfg.Raw {
		if e, ok := cfg.Object(key); ok {
			out[key] = e.configEntry()
		}
	}
	return out, len(o.Errs) == before
}

func (o *Object) configEntry() map[string]any {
	out := map[string]any{}
	for _, f := range []string{"text", "description", "value"} {
		if s, ok := o.String(f, 0); ok {
			out[f] = s
		}
	}
	if s, ok := o.Choice("type", configTypes); ok {
		out["type"] = s
	}
	if opts, ok := o.stringList("options"); ok {
		out["options"] = opts
	}
	o.rejectOthers("text", "type", "description", "options", "value")
	return out
}

func (o *Object) stringList(name string) ([]string, bool) {
	items, ok := o.List(name)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	valid := true
	for i, it := range items {
		var s string
		if bytes.Equal(bytes.TrimSpace(it), []byte("null")) || json.Unmarshal(it, &s) != nil {
			o.Fail(fmt.Sprintf("%s.%d", name, i), MsgString)
			valid = false
		}
		out = append(out, s)
	}
	return out, valid
}

// rejectOthers records an error for every field not in allowed.
func (o *Object) rejectOthers(allowed ...string) {
	for name := range o.Raw {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			o.Fail(name, "Unknown field.")
		}
	}
}
