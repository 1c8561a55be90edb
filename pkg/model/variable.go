package model

import (
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Variable is a row of variables joined with its Device's public fields.
type Variable struct {
	bun.BaseModel `bun:"table:variables,alias:v"`

	ID                  int64           `bun:"id,pk,autoincrement"`
	PublicID            string          `bun:"public_id,nullzero"`
	AccountID           int64           `bun:"account_id"`
	DeviceID            int64           `bun:"device_id"`
	Label               string          `bun:"label"`
	Name                string          `bun:"name"`
	Description         string          `bun:"description"`
	Unit                string          `bun:"unit"`
	Icon                string          `bun:"icon"`
	Type                string          `bun:"type"`
	SyntheticExpression string          `bun:"synthetic_expression"`
	Tags                []string        `bun:"tags,array"`
	Properties          json.RawMessage `bun:"properties,type:jsonb"`
	LastValue           *float64        `bun:"last_value"`
	LastValueTS         *time.Time      `bun:"last_value_ts"`
	LastValueContext    json.RawMessage `bun:"last_value_context,type:jsonb"`
	LastValueCreated    *time.Time      `bun:"last_value_created"`
	LastActivity        *time.Time      `bun:"last_activity"`
	CreatedAt           time.Time       `bun:"created_at,nullzero"`
	// RollupsUntil is internal (the rollup tiers' upkeep, pkg/ingest rollupmark.go), never
	// shown; read with the row's other columns, set by the database only.
	RollupsUntil time.Time `bun:"rollups_until,scanonly"`

	DevicePublicID string `bun:"device_public_id,scanonly"`
	DeviceLabel    string `bun:"device_label,scanonly"`
	DeviceName     string `bun:"device_name,scanonly"`
}

// VariableJSON is the Variable response object (SPEC "Variable").
type VariableJSON struct {
	ID                  string          `json:"id"`
	Label               string          `json:"label"`
	Name                string          `json:"name"`
	Description         string          `json:"description"`
	Device              Ref             `json:"device"`
	Icon                string          `json:"icon"`
	LastActivity        *int64          `json:"lastActivity"`
	LastValue           map[string]any  `json:"lastValue"`
	Properties          json.RawMessage `json:"properties"`
	Tags                []string        `json:"tags"`
	Type                string          `json:"type"`
	Unit                string          `json:"unit"`
	SyntheticExpression string          `json:"syntheticExpression"`
	URL                 string          `json:"url"`
	ValuesURL           string          `json:"valuesUrl"`
	CreatedAt           string          `json:"createdAt"`
}

// JSON renders the Variable; base is the absolute root of url fields.
func (v *Variable) JSON(base string) VariableJSON {
	return VariableJSON{
		ID: v.PublicID, Label: v.Label, Name: v.Name, Description: v.Description,
		Device: Ref{ID: v.DevicePublicID, Label: v.DeviceLabel, Name: v.DeviceName,
			URL: base + "/api/v2.0/devices/" + v.DevicePublicID},
		Icon: v.Icon, LastActivity: Millis(v.LastActivity), LastValue: v.lastValue(),
		Properties: objectOrEmpty(v.Properties), Tags: nonNil(v.Tags), Type: v.Type, Unit: v.Unit,
		SyntheticExpression: v.SyntheticExpression,
		URL:                 base + "/api/v2.0/variables/" + v.PublicID,
		ValuesURL:           base + "/api/v1.6/variables/" + v.PublicID + "/values",
		CreatedAt:           Timestamp(v.CreatedAt),
	}
}

// lastValue is {} until a value is stored, then the dot with the greatest timestamp.
func (v *Variable) lastValue() map[string]any {
	if v.LastValue == nil || v.LastValueTS == nil {
		return map[string]any{}
	}
	return map[string]any{
		"value": *v.LastValue, "timestamp": v.LastValueTS.UnixMilli(),
		"context": objectOrEmpty(v.LastValueContext), "created_at": Millis(v.LastValueCreated),
	}
}
