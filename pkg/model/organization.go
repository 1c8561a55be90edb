package model

import (
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Organization is a row of organizations.
type Organization struct {
	bun.BaseModel `bun:"table:organizations,alias:o"`

	ID          int64           `bun:"id,pk,autoincrement"`
	PublicID    string          `bun:"public_id,nullzero"`
	AccountID   int64           `bun:"account_id"`
	Label       string          `bun:"label"`
	Name        string          `bun:"name"`
	Description string          `bun:"description"`
	Properties  json.RawMessage `bun:"properties,type:jsonb"`
	CreatedAt   time.Time       `bun:"created_at,nullzero"`
}

// Role is a row of roles; every account has admin, editor and viewer.
type Role struct {
	bun.BaseModel `bun:"table:roles,alias:r"`

	ID        int64     `bun:"id,pk,autoincrement"`
	PublicID  string    `bun:"public_id"`
	AccountID int64     `bun:"account_id"`
	Label     string    `bun:"label"`
	Name      string    `bun:"name"`
	CreatedAt time.Time `bun:"created_at"`
}

// Membership is one Organization of a User with the User's Role in it.
type Membership struct {
	UserID        int64           `bun:"user_id"`
	OrgPublicID   string          `bun:"org_public_id"`
	OrgLabel      string          `bun:"org_label"`
	OrgName       string          `bun:"org_name"`
	OrgProperties json.RawMessage `bun:"org_properties"`
	OrgCreatedAt  time.Time       `bun:"org_created_at"`
	RolePublicID  string          `bun:"role_public_id"`
	RoleLabel     string          `bun:"role_label"`
	RoleName      string          `bun:"role_name"`
	RoleCreatedAt time.Time       `bun:"role_created_at"`
}

// OrganizationResponse is the full Organization object.
type OrganizationResponse struct {
	URL         string          `json:"url"`
	ID          string          `json:"id"`
	Label       string          `json:"label"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Properties  json.RawMessage `json:"properties"`
	CreatedAt   string          `json:"createdAt"`
}

// OrganizationSummary is an Organization embedded in a User, with the User's Role (spec).
type OrganizationSummary struct {
	URL        string          `json:"url"`
	ID         string          `json:"id"`
	Label      string          `json:"label"`
	Name       string          `json:"name"`
	CreatedAt  string          `json:"createdAt"`
	Properties json.RawMessage `json:"properties"`
	Role       RoleSummary     `json:"role"`
}

// RoleSummary is the Role embedded in an Organization summary (spec).
type RoleSummary struct {
	URL       string `json:"url"`
	Label     string `json:"label"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
}

// RoleResponse is the full Role object: the summary plus its id.
type RoleResponse struct {
	URL       string `json:"url"`
	ID        string `json:"id"`
	Label     string `json:"label"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
}

// OrganizationURL is the absolute URL of an Organization.
func OrganizationURL(base, id string) string { return base + "/api/v2.0/organizations/" + id }

// RoleURL is the absolute URL of a Role.
func RoleURL(base, id string) string { return base + "/api/v2.0/roles/" + id }

// Response renders the full Organization.
func (o *Organization) Response(base string) OrganizationResponse {
	return OrganizationResponse{URL: OrganizationURL(base, o.PublicID), ID: o.PublicID, Label: o.Label,
		Name: o.Name, Description: o.Description, Properties: orEmptyObject(o.Properties),
		CreatedAt: Timestamp(o.CreatedAt)}
}

// Response renders the full Role.
func (r *Role) Response(base string) RoleResponse {
	return RoleResponse{URL: RoleURL(base, r.PublicID), ID: r.PublicID, Label: r.Label, Name: r.Name,
		CreatedAt: Timestamp(r.CreatedAt)}
}

// Summary renders the membership as it is embedded in a User.
func (m *Membership) Summary(base string) OrganizationSummary {
	return OrganizationSummary{URL: OrganizationURL(base, m.OrgPublicID), ID: m.OrgPublicID,
		Label: m.OrgLabel, Name: m.OrgName, CreatedAt: Timestamp(m.OrgCreatedAt),
		Properties: orEmptyObject(m.OrgProperties),
		Role: RoleSummary{URL: RoleURL(base, m.RolePublicID), Label: m.RoleLabel, Name: m.RoleName,
			CreatedAt: Timestamp(m.RoleCreatedAt)}}
}

func orEmptyObject(j json.RawMessage) json.RawMessage {
	if len(j) == 0 {
		return json.RawMessage("{}")
	}
	return j
}
