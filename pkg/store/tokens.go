package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/model"
)

// TokenFields are the list filters and sort keys of tokens.
var TokenFields = map[string]Field{
	"id":        {Column: "t.public_id", Kind: ID},
	"label":     {Column: "t.label", Kind: Text, Sortable: true, Searchable: true},
	"scope":     {Column: "t.scope", Kind: Text},
	"createdAt": {Column: "t.created_at", Kind: Time, Sortable: true},
}

// tokenRows scopes a select of tokens (alias t) to the account, and to one device
// when device is not 0, joining the device (alias d).
func tokenRows(q *bun.SelectQuery, accountID, device int64) *bun.SelectQuery {
	q = q.Join("LEFT JOIN devices AS d ON d.id = t.device_id").Where("t.account_id = ?", accountID).
		Where("t.revoked_at IS NULL")
	if device != 0 {
		q = q.Where("t.device_id = ?", device)
	}
	return q
}

// ListTokens returns one page of the account's tokens (one device's when device is
// not 0) and the count of all matches.
func ListTokens(ctx context.Context, db bun.IDB, accountID, device int64, p ListParams) ([]model.Token, int, error) {
	tokens := []model.Token{}
	base := func() *bun.SelectQuery { return tokenRows(db.NewSelect().TableExpr("tokens AS t"), accountID, device) }
	full := tokenRows(db.NewSelect().Model(&tokens), accountID, device).
		ColumnExpr("t.id, t.public_id, t.account_id, t.label, t.scope, t.device_id, t.created_at").
		ColumnExpr("d.public_id AS device_public_id, d.label AS device_label")
	n, err := ScanPage(ctx, p, base, "t.id", full)
	if err != nil {
		return nil, 0, fmt.Errorf("list tokens: %w", err)
	}
	return tokens, n, nil
}

// CreateToken inserts t (its hash, label, scope and device) and reads back its id
// and creation time.
func CreateToken(ctx context.Context, db bun.IDB, t *model.Token) error {
	if _, err := db.NewInsert().Model(t).Column("account_id", "hash", "label", "scope", "device_id").
		Returning("id, public_id, created_at").Exec(ctx); err != nil {
		return fmt.Errorf("insert token: %w", err)
	}
	return nil
}

// DeleteToken deletes the account's token with that public id (of that device when
// device is not 0) and tells whether there was one.
func DeleteToken(ctx context.Context, db bun.IDB, accountID, device int64, publicID string) (bool, error) {
	q := db.NewDelete().TableExpr("tokens AS t").Where("t.account_id = ?", accountID).Where("t.public_id = ?", publicID)
	if device != 0 {
		q = q.Where("t.device_id = ?", device)
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("delete token: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
