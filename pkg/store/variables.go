package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/pkg/values"
)

// VariableFields are the filterable and sortable fields of Variable lists (API.md §3).
var VariableFields = map[string]Field{
	"id":            {Column: "v.public_id", Kind: ID},
	"label":         {Column: "v.label", Kind: Text, Sortable: true, Searchable: true},
	"name":          {Column: "v.name", Kind: Text, Sortable: true, Searchable: true},
	"description":   {Column: "v.description", Kind: Text},
	"unit":          {Column: "v.unit", Kind: Text},
	"tags":          {Column: "v.tags", Kind: Array},
	"lastActivity":  {Column: "v.last_activity", Kind: Time, Sortable: true},
	"createdAt":     {Column: "v.created_at", Kind: Time, Sortable: true},
	"device":        {Column: "dv.public_id", Kind: ID},
	"device__id":    {Column: "dv.public_id", Kind: ID},
	"device__label": {Column: "dv.label", Kind: Text},
}

// selectVariables is the Variable read of one account, with its Device's fields.
func selectVariables(db bun.IDB, accountID int64, dest any) *bun.SelectQuery {
	return variableRows(db.NewSelect().Model(dest), accountID).ColumnExpr("v.*").
		ColumnExpr("dv.public_id AS device_public_id, dv.label AS device_label, dv.name AS device_name")
}

// variableRows scopes a select of variables (alias v) to the account and joins the
// Device (alias dv).
func variableRows(q *bun.SelectQuery, accountID int64) *bun.SelectQuery {
	return q.
		Join("JOIN devices AS dv ON dv.id = v.device_id").
		Where("v.account_id = ?", accountID)
}

// ListVariables returns one page of the account's Variables (of one Device when
// deviceID is not 0) and the count of all matches.
func ListVariables(ctx context.Context, db bun.IDB, accountID, deviceID int64, p ListParams) ([]model.Variable, int, error) {
	vars := []model.Variable{}
	base := func() *bun.SelectQuery {
		q := variableRows(db.NewSelect().TableExpr("variables AS v"), accountID)
		if deviceID != 0 {
			q = q.Where("v.device_id = ?", deviceID)
		}
		return q
	}
	n, err := ScanPage(ctx, p, base, "v.id", selectVariables(db, accountID, &vars))
	if err != nil {
		return nil, 0, fmt.Errorf("list variables: %w", err)
	}
	return vars, n, nil
}

// GetVariable reads the account's Variable by key: an id, or a ~label within the
// Device deviceID (0: ids only). forUpdate locks the row for the caller's transaction.
func GetVariable(ctx context.Context, db bun.IDB, accountID, deviceID int64, key validate.Key, forUpdate bool) (*model.Variable, error) {
	if key.ID == "" && deviceID == 0 {
		return nil, ErrNotFound // a label is only unique within a Device
	}
	v := new(model.Variable)
	q := selectVariables(db, accountID, v)
	if deviceID != 0 {
		q = q.Where("v.device_id = ?", deviceID)
	}
	if key.ID != "" {
		q = q.Where("v.public_id = ?", key.ID)
	} else {
		q = q.Where("v.label = ?", key.Label)
	}
	if forUpdate {
		q = q.For("UPDATE OF v")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("get variable %q: %w", key.Raw, err)
	}
	return v, nil
}

// variableColumns are the columns a create or update writes.
var variableColumns = []string{"label", "name", "description", "unit", "icon", "type", "tags", "properties"}

// InsertVariable creates v and fills its generated id, public id and createdAt.
func InsertVariable(ctx context.Context, db bun.IDB, v *model.Variable) error {
	_, err := db.NewInsert().Model(v).Column(append(variableColumns, "account_id", "device_id")...).
		Returning("id, public_id, created_at").Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert variable: %w", err)
	}
	return nil
}

// UpdateVariable writes the editable columns of v.
func UpdateVariable(ctx context.Context, db bun.IDB, v *model.Variable) error {
	_, err := db.NewUpdate().Model(v).Column(variableColumns...).WherePK().Exec(ctx)
	if err != nil {
		return fmt.Errorf("update variable: %w", err)
	}
	return nil
}

// DeleteVariable removes a Variable, its values and their rollup tiers, in the
// caller's transaction.
func DeleteVariable(ctx context.Context, tx bun.Tx, id int64) error {
	if err := deleteValues(ctx, tx, []int64{id}); err != nil {
		return fmt.Errorf("delete variable: %w", err)
	}
	if _, err := tx.NewDelete().TableExpr("variables").Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete variable: %w", err)
	}
	return nil
}

// deleteValues removes every value of vars in both layouts and every rollup tile
// (values.DeleteAll), in bun's transaction.
func deleteValues(ctx context.Context, tx bun.Tx, vars []int64) error {
	// the driver's $n parameters, past bun's ? formatting
	exec := func(ctx context.Context, sql string, args ...any) error {
		_, err := tx.Tx.ExecContext(ctx, sql, args...)
		return err
	}
	return values.DeleteAll(ctx, exec, vars)
}
