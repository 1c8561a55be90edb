package model

import (
	"time"

	"github.com/uptrace/bun"
)

// Token is a row of tokens: its hash, never its secret (API.md §13).
type Token struct {
	bun.BaseModel `bun:"table:tokens,alias:t"`

	ID        int64     `bun:"id,pk,autoincrement"`
	PublicID  string    `bun:"public_id,nullzero"`
	AccountID int64     `bun:"account_id"`
	Hash      []byte    `bun:"hash"`
	Label     string    `bun:"label"`
	Scope     string    `bun:"scope"`
	DeviceID  *int64    `bun:"device_id"`
	CreatedAt time.Time `bun:"created_at,nullzero"`

	DevicePublicID *string `bun:"device_public_id,scanonly"`
	DeviceLabel    *string `bun:"device_label,scanonly"`
}

// TokenResponse is a token as listed; Secret only on creation.
type TokenResponse struct {
	ID        string       `json:"id"`
	Label     string       `json:"label"`
	Scope     string       `json:"scope"`
	Device    *DeviceBrief `json:"device"`
	CreatedAt string       `json:"createdAt"`
	Secret    string       `json:"token,omitempty"`
}

// DeviceBrief names a device.
type DeviceBrief struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// JSON is the token's response shape.
func (t *Token) JSON(string) TokenResponse {
	r := TokenResponse{ID: t.PublicID, Label: t.Label, Scope: t.Scope, CreatedAt: Timestamp(t.CreatedAt)}
	if t.DevicePublicID != nil {
		r.Device = &DeviceBrief{ID: *t.DevicePublicID, Label: *t.DeviceLabel}
	}
	return r
}
