// Package apibody reads the JSON bodies of the v2.0 resources (Users, Devices,
// Variables, Organizations, memberships) into their models. It needs no database, so
// its rules can be fuzzed alone; lookups (an Organization key) stay in pkg/api.
package apibody

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezones validate the same on every host
	"unicode/utf8"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// UsernameRe is the username rule (API.md §4), also applied to ~username path keys.
var UsernameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,150}$`)

const (
	msgUsername      = "Enter a valid username: 1 to 150 letters (a-z, A-Z), digits, - or _."
	msgTesting       = "Usernames may not start with 'testing'."
	msgEmail         = "Enter a valid email address."
	msgPasswordShort = "Ensure this field has at least 8 characters."
	msgPasswordLong  = "Ensure this field has no more than 72 bytes."
	msgTimezone      = "Enter a valid IANA time zone name, e.g. Europe/Madrid."
)

// ReadUser applies the sent fields of a User body to u (password aside) and returns the
// columns that changed. Messages go to o's errors.
func ReadUser(o *validate.Object, u *model.User) []string {
	var cols []string
	set := func(col string, ok bool) {
		if ok {
			cols = append(cols, col)
		}
	}
	set("username", readUsername(o, &u.Username))
	set("email", readEmail(o, &u.Email))
	set("first_name", readString(o, "firstName", 150, &u.FirstName))
	set("last_name", readString(o, "lastName", 150, &u.LastName))
	set("website", readString(o, "website", 200, &u.Website))
	set("default_organization", readNullable(o, "defaultOrganization", 100, &u.DefaultOrganization))
	set("default_role", readNullable(o, "defaultRole", 100, &u.DefaultRole))
	set("default_dashboard", readNullable(o, "defaultDashboard", 100, &u.DefaultDashboard))
	set("language", readNullable(o, "language", 35, &u.Language))
	set("number_format", readNullable(o, "numberFormat", 50, &u.NumberFormat))
	set("timezone", readTimezone(o, &u.Timezone))
	if n, ok := o.NullableInt("decimalPlaces", 0, 16); ok {
		u.DecimalPlaces = n
		set("decimal_places", true)
	}
	if b, ok := o.Bool("isActive"); ok {
		u.IsActive = b
		set("is_active", true)
	}
	if b, ok := o.Bool("firstTime"); ok {
		u.FirstTime = b
		set("first_time", true)
	}
	if tags, ok := o.Tags("tags"); ok {
		u.Tags = tags
		set("tags", true)
	}
	set("contact_methods", readContactMethods(o, &u.ContactMethods))
	set("properties", readUserProperties(o, &u.Properties))
	return cols
}

// readString reads a string field into dst when it was sent and is valid.
func readString(o *validate.Object, name string, max int, dst *string) bool {
	v, ok := o.String(name, max)
	if ok {
		*dst = v
	}
	return ok
}

func readNullable(o *validate.Object, name string, max int, dst **string) bool {
	v, ok := o.NullableString(name, max)
	if ok {
		*dst = v
	}
	return ok
}

func readUsername(o *validate.Object, dst *string) bool {
	v, ok := o.String("username", 0)
	switch {
	case !ok:
		return false
	case v == "":
		o.Fail("username", validate.MsgBlank)
	case !UsernameRe.MatchString(v):
		o.Fail("username", msgUsername)
	case strings.HasPrefix(strings.ToLower(v), "testing"):
		o.Fail("username", msgTesting)
	default:
		*dst = v
		return true
	}
	return false
}

func readEmail(o *validate.Object, dst *string) bool {
	v, ok := o.String("email", 254)
	switch {
	case !ok:
		return false
	case v == "":
		o.Fail("email", validate.MsgBlank)
	case !validEmail(v):
		o.Fail("email", msgEmail)
	default:
		*dst = v
		return true
	}
	return false
}

// validEmail accepts a bare address (no display name) with a dotted domain.
func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	return strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}

// ReadPassword reads the create-time password; bcrypt uses at most 72 bytes, so a
// longer one is refused rather than silently cut.
func ReadPassword(o *validate.Object) (string, bool) {
	v, ok := o.String("password", 0)
	switch {
	case !ok:
		return "", false
	case utf8.RuneCountInString(v) < 8:
		o.Fail("password", msgPasswordShort)
	case len(v) > 72:
		o.Fail("password", msgPasswordLong)
	default:
		return v, true
	}
	return "", false
}

func readTimezone(o *validate.Object, dst **string) bool {
	v, ok := o.NullableString("timezone", 64)
	if !ok {
		return false
	}
	if v != nil {
		if _, err := time.LoadLocation(*v); err != nil || *v == "" || *v == "Local" {
			o.Fail("timezone", msgTimezone)
			return false
		}
	}
	*dst = v
	return true
}

// readContactMethods reads [{"type": email|sms|phone|telegram, "value": string}].
func readContactMethods(o *validate.Object, dst *[]model.ContactMethod) bool {
	items, ok := o.List("contactMethods")
	if !ok {
		return false
	}
	out := make([]model.ContactMethod, 0, len(items))
	valid := true
	for i, it := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) != nil || m == nil {
			o.Fail("contactMethods."+strconv.Itoa(i), validate.MsgObject)
			valid = false
			continue
		}
		item := validate.NewObject(m, o.Errs, o.Prefix+"contactMethods."+strconv.Itoa(i)+".")
		cm, ok := readContactMethod(item)
		valid = valid && ok
		out = append(out, cm)
	}
	if valid {
		*dst = out
	}
	return valid
}

func readContactMethod(o *validate.Object) (model.ContactMethod, bool) {
	var cm model.ContactMethod
	ok := o.Require("type", "value")
	t, tok := o.String("type", 0)
	if tok && !slices.Contains(model.ContactTypes, t) {
		o.Fail("type", fmt.Sprintf("\"%s\" is not a valid choice: use one of %s.", t,
			strings.Join(model.ContactTypes, ", ")))
		tok = false
	}
	v, vok := o.String("value", 200)
	if vok && v == "" {
		o.Fail("value", validate.MsgBlank)
		vok = false
	}
	cm.Type, cm.Value = t, v
	return cm, ok && tok && vok
}

// readUserProperties reads the free-form properties; password_update_timestamp is the
// server's and is dropped from what the client sends.
func readUserProperties(o *validate.Object, dst *json.RawMessage) bool {
	p, ok := o.Properties("properties")
	if !ok {
		return false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil {
		o.Fail("properties", validate.MsgObject)
		return false
	}
	delete(m, model.PasswordTimestampKey)
	*dst, _ = json.Marshal(m)
	return true
}
