package apibody

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// readBody is the object reader the handlers build; ok is false for a body the HTTP
// layer refuses before any field is read (not a JSON object).
func readBody(body []byte) (*validate.Object, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil || raw == nil {
		return nil, false
	}
	return validate.NewObject(raw, fault.Fields{}, ""), true
}

// checkRefusal: a refused body is a 400001 whose every message names a field of the
// body (or a required one), by its dotted path.
func checkRefusal(t *testing.T, o *validate.Object, required ...string) {
	t.Helper()
	var ae *fault.Error
	if !errors.As(o.Errs.Err(), &ae) || ae.Kind != fault.KindInvalid {
		t.Fatalf("refusal %#v", o.Errs.Err())
	}
	for path, msgs := range o.Errs {
		root, _, _ := strings.Cut(path, ".")
		if len(msgs) == 0 || (!o.Has(root) && !slices.Contains(required, root)) {
			t.Fatalf("message on %q names no sent or required field: %v", path, o.Errs)
		}
	}
}

// checkStored: nothing accepted carries a NUL (PostgreSQL text cannot hold it).
func checkStored(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil || strings.Contains(string(b), `\u0000`) {
		t.Fatalf("accepted model %s (%v)", b, err)
	}
}

func checkLen(t *testing.T, field, s string, min, max int) {
	t.Helper()
	if n := utf8.RuneCountInString(s); n < min || n > max {
		t.Fatalf("%s %q accepted (%d characters, want %d..%d)", field, s, n, min, max)
	}
}

func checkLabel(t *testing.T, field, s string) {
	t.Helper()
	if l, ok := validate.Label(s); !ok || l != s {
		t.Fatalf("%s %q accepted", field, s)
	}
}

func checkTags(t *testing.T, tags []string) {
	t.Helper()
	if len(tags) > 20 {
		t.Fatalf("%d tags accepted", len(tags))
	}
	for _, tag := range tags {
		checkLen(t, "tag", tag, 0, 50)
	}
}

func checkProperties(t *testing.T, p json.RawMessage) {
	t.Helper()
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil || m == nil || len(p) > maxProperties {
		t.Fatalf("properties %.100s… accepted (%d bytes)", p, len(p))
	}
}

func seed(f *testing.F, bodies ...string) {
	for _, b := range bodies {
		f.Add([]byte(b), true)
		f.Add([]byte(b), false)
	}
	f.Add([]byte(`[]`), true)
	f.Add([]byte(`null`), false)
}

// FuzzReadUser: an accepted User body (create with password, or PATCH) obeys API.md
// §4; a refused one names its fields.
func FuzzReadUser(f *testing.F) {
	seed(f, `{"username": "ana", "email": "ana@example.com", "password": "12345678"}`,
		`{"username": "testingX", "email": "ana <ana@example.com>", "password": "short"}`,
		`{"username": "a b", "email": "a@b", "timezone": "Local", "decimalPlaces": 17, "tags": [1]}`,
		`{"firstName": "Ana", "timezone": "Europe/Madrid", "decimalPlaces": null, "contactMethods": [{"type": "sms", "value": "1"}],
		  "properties": {"password_update_timestamp": 1, "a": "b"}, "language": null, "isActive": false}`,
		`{"contactMethods": [{"type": "fax", "value": ""}, null], "properties": {"\u0000": 1}, "website": "\u0000"}`,
		`{"password": "`+strings.Repeat("é", 40)+`"}`, `{"username": "Testing1"}`, `{"username": "a-b_C9"}`)
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		o, ok := readBody(body)
		if !ok {
			return
		}
		var required []string
		if create {
			required = []string{"username", "email", "password"}
			o.Require(required...)
		}
		u := &model.User{FirstTime: true, IsActive: true, Tags: []string{}, ContactMethods: []model.ContactMethod{},
			Properties: json.RawMessage("{}")}
		cols := ReadUser(o, u)
		password, okPassword := "", false
		if create {
			password, okPassword = ReadPassword(o)
		}
		if len(o.Errs) > 0 {
			checkRefusal(t, o, required...)
			return
		}
		if create && (!okPassword || utf8.RuneCountInString(password) < 8 || len(password) > 72) {
			t.Fatalf("password %q accepted", password)
		}
		checkUser(t, u, cols, create)
	})
}

func checkUser(t *testing.T, u *model.User, cols []string, create bool) {
	t.Helper()
	checkStored(t, u)
	if create || slices.Contains(cols, "username") {
		if !UsernameRe.MatchString(u.Username) || strings.HasPrefix(strings.ToLower(u.Username), "testing") {
			t.Fatalf("username %q accepted", u.Username)
		}
	}
	if (create || slices.Contains(cols, "email")) && !validEmail(u.Email) {
		t.Fatalf("email %q accepted", u.Email)
	}
	checkLen(t, "firstName", u.FirstName, 0, 150)
	checkLen(t, "lastName", u.LastName, 0, 150)
	checkLen(t, "website", u.Website, 0, 200)
	if tz := u.Timezone; tz != nil {
		if loc, err := time.LoadLocation(*tz); err != nil || *tz == "" || *tz == "Local" || loc == time.Local {
			t.Fatalf("timezone %q accepted", *tz)
		}
	}
	if d := u.DecimalPlaces; d != nil && (*d < 0 || *d > 16) {
		t.Fatalf("decimalPlaces %d accepted", *d)
	}
	checkTags(t, u.Tags)
	for _, cm := range u.ContactMethods {
		if !slices.Contains(model.ContactTypes, cm.Type) || cm.Value == "" || utf8.RuneCountInString(cm.Value) > 200 {
			t.Fatalf("contact method %+v accepted", cm)
		}
	}
	checkProperties(t, u.Properties)
	if strings.Contains(string(u.Properties), `"`+model.PasswordTimestampKey+`"`) {
		t.Fatalf("client-sent %s kept: %s", model.PasswordTimestampKey, u.Properties)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(cols)))) != len(cols) {
		t.Fatalf("columns %v repeat", cols)
	}
}

// FuzzReadDevice: an accepted Device body (create or PATCH) obeys API.md §5; a sent
// organization is a key that can name something, or null.
func FuzzReadDevice(f *testing.F) {
	seed(f, `{"label": "Kitchen", "name": "K", "tags": ["a"], "isActive": false, "properties": {"_color": "#fff"}, "organization": "~acme"}`,
		`{"label": "-bad", "name": "", "description": 1, "organization": "acme"}`,
		`{"name": "`+strings.Repeat("n", 201)+`", "properties": {"_icon": null, "other": 1}, "organization": null}`,
		`{"label": "a", "properties": {"_location_fixed": {"lat": -90, "lng": 180}, "_config": {}}, "organization": "0123456789abcdef01234567"}`,
		`{"name": ""}`, `{"description": "`+strings.Repeat("d", 2001)+`"}`)
	f.Fuzz(func(t *testing.T, body []byte, required bool) {
		o, ok := readBody(body)
		if !ok {
			return
		}
		d := &model.Device{IsActive: true, Tags: []string{}, Properties: json.RawMessage("{}")}
		ReadDevice(o, d, required)
		key, sent := ReadOrganizationKey(o)
		if len(o.Errs) > 0 {
			checkRefusal(t, o, "label")
			return
		}
		checkStored(t, d)
		if required || o.Has("label") {
			checkLabel(t, "label", d.Label)
		}
		if d.Name == "" && (required || o.Has("name")) {
			t.Fatalf("empty name accepted (label %q)", d.Label)
		}
		checkLen(t, "name", d.Name, 0, maxName)
		checkLen(t, "description", d.Description, 0, maxDescription)
		checkTags(t, d.Tags)
		checkProperties(t, d.Properties)
		if sent != o.Has("organization") || (key != nil && key.ID == "" && key.Label == "") {
			t.Fatalf("organization read as %+v, sent %v", key, sent)
		}
	})
}

// FuzzApplyVariable: an accepted Variable body obeys API.md §5; a refusal is a 400001
// naming its fields.
func FuzzApplyVariable(f *testing.F) {
	seed(f, `{"label": "Temp", "unit": "°C", "icon": "t", "type": "raw", "properties": {"a": null, "b": 1}}`,
		`{"label": "", "type": "synthetic", "unit": "`+strings.Repeat("u", 101)+`", "tags": [null]}`,
		`{"name": "x", "properties": []}`, `{"unit": "`+strings.Repeat("u", 101)+`"}`, `{"icon": "`+strings.Repeat("i", 100)+`"}`)
	f.Fuzz(func(t *testing.T, body []byte, required bool) {
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) != nil || raw == nil {
			return
		}
		v := &model.Variable{Type: "raw", Tags: []string{}, Properties: json.RawMessage("{}")}
		err := ApplyVariable(raw, v, required)
		if err != nil {
			checkVariableRefusal(t, raw, err)
			return
		}
		checkStored(t, v)
		if _, sent := raw["label"]; required || sent {
			checkLabel(t, "label", v.Label)
		}
		checkLen(t, "name", v.Name, 0, maxName)
		checkLen(t, "description", v.Description, 0, maxDescription)
		checkLen(t, "unit", v.Unit, 0, maxShortText)
		checkLen(t, "icon", v.Icon, 0, maxShortText)
		if v.Type != "raw" {
			t.Fatalf("type %q accepted", v.Type)
		}
		checkTags(t, v.Tags)
		checkProperties(t, v.Properties)
	})
}

func checkVariableRefusal(t *testing.T, raw map[string]json.RawMessage, err error) {
	t.Helper()
	var ae *fault.Error
	if !errors.As(err, &ae) {
		t.Fatalf("refusal %#v", err)
	}
	f, _ := ae.Detail.(fault.Fields)
	checkRefusal(t, &validate.Object{Raw: raw, Errs: f}, "label")
}

// FuzzReadOrganization: an accepted Organization body has a valid label, a non-blank
// name, bounded texts and object properties.
func FuzzReadOrganization(f *testing.F) {
	seed(f, `{"label": "Acme", "name": "Acme Inc.", "description": "d", "properties": {"a": 1}}`,
		`{"label": "acme corp", "name": "", "properties": null}`)
	f.Fuzz(func(t *testing.T, body []byte, required bool) {
		o, ok := readBody(body)
		if !ok {
			return
		}
		if required {
			o.Require("label")
		}
		org := &model.Organization{Properties: json.RawMessage("{}")}
		cols := ReadOrganization(o, org)
		if len(o.Errs) > 0 {
			checkRefusal(t, o, "label")
			return
		}
		checkStored(t, org)
		if required || o.Has("label") {
			checkLabel(t, "label", org.Label)
		}
		if o.Has("name") {
			checkLen(t, "name", org.Name, 1, 200)
		}
		checkLen(t, "description", org.Description, 0, 2000)
		checkProperties(t, org.Properties)
		for _, c := range cols {
			if !o.Has(c) {
				t.Fatalf("column %q changed without being sent", c)
			}
		}
	})
}

// FuzzReadAssignments: accepted assignments carry valid labels (a role only when
// assigning); refusals name the item and its field.
func FuzzReadAssignments(f *testing.F) {
	seed(f, `[{"label": "Acme", "role": "editor"}]`, `[{"label": "a"}, {"role": "x y"}, null, 1]`, `[]`)
	f.Fuzz(func(t *testing.T, body []byte, withRole bool) {
		var items []json.RawMessage
		if json.Unmarshal(body, &items) != nil || items == nil {
			return
		}
		errs := fault.Fields{}
		out := ReadAssignments(items, errs, withRole)
		if len(out) != len(items) {
			t.Fatalf("%d assignments for %d items", len(out), len(items))
		}
		if len(errs) > 0 {
			checkRefusal(t, &validate.Object{Raw: indexKeys(len(items)), Errs: errs})
			return
		}
		for _, a := range out {
			checkLabel(t, "label", a.Org)
			if withRole {
				checkLabel(t, "role", a.Role)
			} else if a.Role != "" {
				t.Fatalf("role %q read on removal", a.Role)
			}
		}
	})
}

// indexKeys stands for an array body as an object keyed "0", "1", …: the roots of the
// paths its messages may name.
func indexKeys(n int) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, n)
	for i := range n {
		b, _ := json.Marshal(i)
		m[string(b)] = nil
	}
	return m
}
