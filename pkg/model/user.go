package model

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// User is a row of users. PasswordHash is a bcrypt hash and never leaves the server.
type User struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID                  int64           `bun:"id,pk,autoincrement"`
	PublicID            string          `bun:"public_id,nullzero"`
	AccountID           int64           `bun:"account_id"`
	Username            string          `bun:"username"`
	Email               string          `bun:"email"`
	PasswordHash        string          `bun:"password_hash"`
	PasswordUpdatedAt   time.Time       `bun:"password_updated_at,nullzero"`
	FirstName           string          `bun:"first_name"`
	LastName            string          `bun:"last_name"`
	DefaultOrganization *string         `bun:"default_organization"`
	DefaultRole         *string         `bun:"default_role"`
	DefaultDashboard    *string         `bun:"default_dashboard"`
	Language            *string         `bun:"language"`
	Website             string          `bun:"website"`
	Timezone            *string         `bun:"timezone"`
	DecimalPlaces       *int64          `bun:"decimal_places"`
	NumberFormat        *string         `bun:"number_format"`
	FirstTime           bool            `bun:"first_time"`
	IsActive            bool            `bun:"is_active"`
	LastLogin           *time.Time      `bun:"last_login"`
	Tags                []string        `bun:"tags,array"`
	ContactMethods      []ContactMethod `bun:"contact_methods,type:jsonb"`
	Properties          json.RawMessage `bun:"properties,type:jsonb"`
	CreatedAt           time.Time       `bun:"created_at,nullzero"`

	Organizations []Membership `bun:"-"`
}

// ContactMethod is one way to reach a User.
type ContactMethod struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ContactTypes are the allowed ContactMethod types.
var ContactTypes = []string{"email", "sms", "phone", "telegram"}

// PasswordTimestampKey is the server-owned properties entry: when the password was set.
const PasswordTimestampKey = "password_update_timestamp"

// UserResponse is the User object, fields in the spec's order.
type UserResponse struct {
	URL                 string                     `json:"url"`
	ID                  string                     `json:"id"`
	Username            string                     `json:"username"`
	FirstName           string                     `json:"firstName"`
	LastName            string                     `json:"lastName"`
	Email               string                     `json:"email"`
	DefaultOrganization *string                    `json:"defaultOrganization"`
	DefaultRole         *string                    `json:"defaultRole"`
	DefaultDashboard    *string                    `json:"defaultDashboard"`
	MugshotURL          string                     `json:"mugshotUrl"`
	Language            *string                    `json:"language"`
	Website             string                     `json:"website"`
	Timezone            *string                    `json:"timezone"`
	DecimalPlaces       *int64                     `json:"decimalPlaces"`
	NumberFormat        *string                    `json:"numberFormat"`
	FirstTime           bool                       `json:"firstTime"`
	Properties          map[string]json.RawMessage `json:"properties"`
	Organizations       []OrganizationSummary      `json:"organizations"`
	OrganizationsCount  int                        `json:"organizationsCount"`
	IsActive            bool                       `json:"isActive"`
	LastLogin           *string                    `json:"lastLogin"`
	Tags                []string                   `json:"tags"`
	CreatedAt           string                     `json:"createdAt"`
	ContactMethods      []ContactMethod            `json:"contactMethods"`
}

// UserURL is the absolute URL of a User.
func UserURL(base, id string) string { return base + "/api/v2.0/users/" + id }

// Mugshot is the Gravatar URL of an e-mail address.
func Mugshot(email string) string {
	sum := md5.Sum([]byte(strings.ToLower(strings.TrimSpace(email))))
	return "https://www.gravatar.com/avatar/" + hex.EncodeToString(sum[:]) + "?d=identicon"
}

// Response renders the User; Organizations must have been loaded.
func (u *User) Response(base string) UserResponse {
	orgs := make([]OrganizationSummary, len(u.Organizations))
	for i := range u.Organizations {
		orgs[i] = u.Organizations[i].Summary(base)
	}
	return UserResponse{
		URL: UserURL(base, u.PublicID), ID: u.PublicID, Username: u.Username,
		FirstName: u.FirstName, LastName: u.LastName, Email: u.Email,
		DefaultOrganization: u.DefaultOrganization, DefaultRole: u.DefaultRole,
		DefaultDashboard: u.DefaultDashboard, MugshotURL: Mugshot(u.Email), Language: u.Language,
		Website: u.Website, Timezone: u.Timezone, DecimalPlaces: u.DecimalPlaces,
		NumberFormat: u.NumberFormat, FirstTime: u.FirstTime, Properties: u.properties(),
		Organizations: orgs, OrganizationsCount: len(orgs), IsActive: u.IsActive,
		LastLogin: NullableTimestamp(u.LastLogin), Tags: nonNil(u.Tags), CreatedAt: Timestamp(u.CreatedAt),
		ContactMethods: nonNil(u.ContactMethods),
	}
}

// properties are the stored ones plus the server-owned password timestamp.
// Raw values keep the client's numbers exactly as sent.
func (u *User) properties() map[string]json.RawMessage {
	p := map[string]json.RawMessage{}
	_ = json.Unmarshal(u.Properties, &p) // stored by us as an object; empty on failure
	p[PasswordTimestampKey] = json.RawMessage(strconv.FormatInt(u.PasswordUpdatedAt.UnixMilli(), 10))
	return p
}
