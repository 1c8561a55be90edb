package validate

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// FuzzDeviceProperties: accepted properties hold only the documented attributes, each
// by its rule (API.md §5); a refusal names properties or a path inside it.
func FuzzDeviceProperties(f *testing.F) {
	for _, s := range []string{`{}`, `{"_icon": "cpu", "_color": "#0af"}`, `{"_color": "rgba(255, 0, 10, 0.5)"}`,
		`{"_color": "rgb(256,0,0)"}`, `{"_color": "#12345"}`, `{"_location_type": "manual", "_location_fixed": {"lat": 90, "lng": -180}}`,
		`{"_location_fixed": {"lat": 91, "lng": 0}}`, `{"_location_fixed": {"lat": "1", "lng": 1e400}}`, `{"_location_variable": "GPS"}`,
		`{"_config": {"k": {"text": "t", "type": "list", "options": ["a", null], "value": "a", "extra": 1}}}`,
		`{"color": "#fff"}`, `{"_icon": null}`, `{"_icon": "\u0000"}`, `[]`, `null`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the HTTP layer refuses the whole body first
		}
		o := NewObject(map[string]json.RawMessage{"properties": raw}, fault.Fields{}, "")
		props, ok := o.DeviceProperties("properties")
		if !ok {
			for path := range o.Errs {
				if path != "properties" && !strings.HasPrefix(path, "properties.") {
					t.Fatalf("refusal names %q: %v", path, o.Errs)
				}
			}
			if len(o.Errs) == 0 {
				t.Fatalf("refused %q without a message", raw)
			}
			return
		}
		if len(o.Errs) != 0 {
			t.Fatalf("accepted with messages %v", o.Errs)
		}
		for attr, v := range props {
			checkDeviceAttribute(t, attr, v)
		}
	})
}

// checkDeviceAttribute re-checks one accepted attribute against its rule.
func checkDeviceAttribute(t *testing.T, attr string, v json.RawMessage) {
	t.Helper()
	if v == nil {
		return // null: removes the attribute
	}
	var s string
	_ = json.Unmarshal(v, &s)
	switch attr {
	case "_icon":
		if !json.Valid(v) || strings.ContainsRune(s, 0) {
			t.Fatalf("_icon %s accepted", v)
		}
	case "_color":
		if !hexColorRe.MatchString(s) && !rgbInRange(s) {
			t.Fatalf("_color %s accepted", v)
		}
	case "_location_type":
		if s != "manual" && s != "specified" && s != "auto" {
			t.Fatalf("_location_type %s accepted", v)
		}
	case "_location_variable":
		if _, ok := Label(s); !ok {
			t.Fatalf("_location_variable %s accepted", v)
		}
	case "_location_fixed":
		checkLocation(t, v)
	case "_config":
		checkConfig(t, v)
	default:
		t.Fatalf("attribute %q accepted", attr)
	}
}

// rgbInRange: rgb(r,g,b) or rgba(r,g,b,a) with each of r, g, b at most 255.
func rgbInRange(s string) bool {
	m := rgbRe.FindStringSubmatch(s)
	if m == nil {
		m = rgbaRe.FindStringSubmatch(s)
	}
	if m == nil {
		return false
	}
	for _, c := range m[1:4] {
		if n, err := strconv.Atoi(c); err != nil || n > 255 {
			return false
		}
	}
	return true
}

func checkLocation(t *testing.T, v json.RawMessage) {
	t.Helper()
	var loc map[string]float64
	if err := json.Unmarshal(v, &loc); err != nil || len(loc) != 2 {
		t.Fatalf("_location_fixed %s accepted (%v)", v, err)
	}
	lat, okLat := loc["lat"]
	lng, okLng := loc["lng"]
	if !okLat || !okLng || lat < -90 || lat > 90 || lng < -180 || lng > 180 {
		t.Fatalf("_location_fixed %s accepted", v)
	}
}

func checkConfig(t *testing.T, v json.RawMessage) {
	t.Helper()
	var cfg map[string]map[string]any
	if err := json.Unmarshal(v, &cfg); err != nil {
		t.Fatalf("_config %s accepted (%v)", v, err)
	}
	for key, e := range cfg {
		for f, fv := range e {
			switch f {
			case "text", "description", "value":
				if _, ok := fv.(string); !ok {
					t.Fatalf("_config.%s.%s %v accepted", key, f, fv)
				}
			case "type":
				if s, _ := fv.(string); !strings.Contains(" boolean date list text number ", " "+s+" ") || s == "" {
					t.Fatalf("_config.%s.type %v accepted", key, fv)
				}
			case "options":
				if _, ok := fv.([]any); !ok {
					t.Fatalf("_config.%s.options %v accepted", key, fv)
				}
			default:
				t.Fatalf("_config.%s.%s accepted", key, f)
			}
		}
	}
}
