package model

import (
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Device is a row of devices joined with its Organization's public fields.
type Device struct {
	bun.BaseModel `bun:"table:devices,alias:d"`

	ID              int64           `bun:"id,pk,autoincrement"`
	PublicID        string          `bun:"public_id,nullzero"`
	AccountID       int64           `bun:"account_id"`
	Label           string          `bun:"label"`
	Name            string          `bun:"name"`
	Description     string          `bun:"description"`
	IsActive        bool            `bun:"is_active"`
	LastActivity    *time.Time      `bun:"last_activity"`
	OrganizationID  *int64          `bun:"organization_id"`
	Tags            []string        `bun:"tags,array"`
	Properties      json.RawMessage `bun:"properties,type:jsonb"`
	VariablesNumber int             `bun:"variables_number"`
	CreatedAt       time.Time       `bun:"created_at,nullzero"`

	OrgPublicID *string `bun:"org_public_id,scanonly"`
	OrgLabel    *string `bun:"org_label,scanonly"`
	OrgName     *string `bun:"org_name,scanonly"`
}

// DeviceJSON is the Device response object (SPEC "Device").
type DeviceJSON struct {
	ID              string          `json:"id"`
	Label           string          `json:"label"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	IsActive        bool            `json:"isActive"`
	LastActivity    *int64          `json:"lastActivity"`
	Organization    *Ref            `json:"organization"`
	Position        map[string]any  `json:"position"`
	Tags            []string        `json:"tags"`
	Properties      json.RawMessage `json:"properties"`
	URL             string          `json:"url"`
	Variables       string          `json:"variables"`
	VariablesNumber int             `json:"variablesNumber"`
	CreatedAt       string          `json:"createdAt"`
}

// Ref is the short form of a related resource: an Organization in a Device, a Device in
// a Variable.
type Ref struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Name  string `json:"name"`
	URL   string `json:"url"`
}

// JSON renders the Device; base is the absolute root of url fields.
func (d *Device) JSON(base string) DeviceJSON {
	url := base + "/api/v2.0/devices/" + d.PublicID
	out := DeviceJSON{
		ID: d.PublicID, Label: d.Label, Name: d.Name, Description: d.Description,
		IsActive: d.IsActive, LastActivity: Millis(d.LastActivity),
		Position: Position(d.Properties), Tags: nonNil(d.Tags), Properties: objectOrEmpty(d.Properties),
		URL: url, Variables: url + "/variables/", VariablesNumber: d.VariablesNumber,
		CreatedAt: Timestamp(d.CreatedAt),
	}
	if d.OrgPublicID != nil {
		out.Organization = &Ref{ID: *d.OrgPublicID, Label: *d.OrgLabel, Name: *d.OrgName,
			URL: base + "/api/v2.0/organizations/" + *d.OrgPublicID}
	}
	return out
}

// Position is {lat, lng} when the location is manual and fixed, else {} (API.md §5).
func Position(properties json.RawMessage) map[string]any {
	var p struct {
		Type  string `json:"_location_type"`
		Fixed *struct {
			Lat json.Number `json:"lat"`
			Lng json.Number `json:"lng"`
		} `json:"_location_fixed"`
	}
	if json.Unmarshal(properties, &p) != nil || p.Type != "manual" || p.Fixed == nil {
		return map[string]any{}
	}
	return map[string]any{"lat": p.Fixed.Lat, "lng": p.Fixed.Lng}
}

// Millis renders a data time as ms since the epoch, nil as null.
func Millis(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}
