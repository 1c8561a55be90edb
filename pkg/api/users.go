package api

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezones validate the same on every host
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// userRoutes registers Users, and the Organizations and Roles they are assigned to.
func (s *Server) userRoutes(v2 *gin.RouterGroup) {
	v2.GET("/users", wrap(s.listUsers))
	v2.POST("/users", wrap(s.createUser))
	v2.GET("/users/:key", wrap(s.getUser))
	v2.PATCH("/users/:key", wrap(s.patchUser))
	v2.PUT("/users/:key", wrap(s.putUser))
	v2.DELETE("/users/:key", wrap(s.deleteUser))
	v2.POST("/users/:key/_/assign_organizations", wrap(s.assignOrganizations))
	v2.POST("/users/:key/_/remove_organizations", wrap(s.removeOrganizations))
	s.organizationRoutes(v2)
}

var usernameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,150}$`)

const (
	msgUsername      = "Enter a valid username: 1 to 150 letters (a-z, A-Z), digits, - or _."
	msgUsernameTaken = "A user with that username already exists."
	msgTesting       = "Usernames may not start with 'testing'."
	msgEmail         = "Enter a valid email address."
	msgPasswordShort = "Ensure this field has at least 8 characters."
	msgPasswordLong  = "Ensure this field has no more than 72 bytes."
	msgPasswordSet   = "The password cannot be changed by this request."
	msgTimezone      = "Enter a valid IANA time zone name, e.g. Europe/Madrid."
)

// E1: create a User (200, as the spec shows, not 201).
func (s *Server) createUser(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	errs := apierr.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require("username", "email", "password")
	u := &model.User{AccountID: account(c).ID, FirstTime: true, IsActive: true, Tags: []string{},
		ContactMethods: []model.ContactMethod{}, Properties: json.RawMessage("{}")}
	readUser(o, u)
	password, _ := readPassword(o)
	if err := errs.Err(); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	u.PasswordHash = string(hash)
	if err := store.CreateUser(c, s.DB, u); err != nil {
		return userStoreError(err)
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

func (s *Server) listUsers(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), store.UserFields, "-createdAt", "u.id")
	users, n, err := store.ListUsers(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, users, n, (*model.User).Response)
	return nil
}

func (s *Server) getUser(c *gin.Context) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

// E2: partial update; only the sent fields change.
func (s *Server) patchUser(c *gin.Context) error { return s.updateUser(c) }

// PUT is a full update: PATCH's rules, with the fields required on create (except the
// password, which no update sets) present.
func (s *Server) putUser(c *gin.Context) error { return s.updateUser(c, "username", "email") }

func (s *Server) updateUser(c *gin.Context, required ...string) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	errs := apierr.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require(required...)
	cols := readUser(o, u)
	if o.Has("password") {
		o.Fail("password", msgPasswordSet)
	}
	if err := errs.Err(); err != nil {
		return err
	}
	if err := store.UpdateUser(c, s.DB, u, cols); err != nil {
		return userStoreError(err)
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

func (s *Server) deleteUser(c *gin.Context) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	if err := store.DeleteUser(c, s.DB, u); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// findUser resolves the path key (id or ~username) within the account.
func (s *Server) findUser(c *gin.Context) (*model.User, error) {
	raw := c.Param("key")
	notFound := apierr.NotFound(fmt.Sprintf("User '%s' was not found.", raw))
	var k store.UserKey
	if name, ok := strings.CutPrefix(raw, "~"); ok {
		if !usernameRe.MatchString(name) {
			return nil, notFound
		}
		k.Username = name
	} else {
		if !validate.IsID(raw) {
			return nil, notFound
		}
		k.ID = raw
	}
	u, err := store.FindUser(c, s.DB, account(c).ID, k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	return u, err
}

func userStoreError(err error) error {
	if errors.Is(err, store.ErrUsernameTaken) {
		return apierr.Invalid("username", msgUsernameTaken)
	}
	return err
}

// readUser applies the sent fields of a User body to u (password aside) and returns the
// columns that changed. Messages go to o's errors.
func readUser(o *validate.Object, u *model.User) []string {
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
	case !usernameRe.MatchString(v):
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

// readPassword reads the create-time password; bcrypt uses at most 72 bytes, so a
// longer one is refused rather than silently cut.
func readPassword(o *validate.Object) (string, bool) {
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
