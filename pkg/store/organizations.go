package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// ErrLabelTaken means another Organization of the account has the label.
var ErrLabelTaken = errors.New("label already used")

// OrganizationFields are the list filters and sort keys of Organizations.
var OrganizationFields = map[string]Field{
	"id":          {Column: "o.public_id", Kind: ID},
	"label":       {Column: "o.label", Kind: Text, Sortable: true, Searchable: true},
	"name":        {Column: "o.name", Kind: Text, Sortable: true, Searchable: true},
	"description": {Column: "o.description", Kind: Text},
	"createdAt":   {Column: "o.created_at", Kind: Time, Sortable: true},
}

// RoleFields are the list filters and sort keys of Roles.
var RoleFields = map[string]Field{
	"id":        {Column: "r.public_id", Kind: ID},
	"label":     {Column: "r.label", Kind: Text, Sortable: true, Searchable: true},
	"name":      {Column: "r.name", Kind: Text, Sortable: true, Searchable: true},
	"createdAt": {Column: "r.created_at", Kind: Time, Sortable: true},
}

// violatesUnique tells whether err violates the named unique constraint or index.
func violatesUnique(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// whereIDOrLabel restricts a select to the row of an id or a ~label in the given column.
func whereIDOrLabel(sel *bun.SelectQuery, alias, labelColumn string, k validate.Key) *bun.SelectQuery {
	if k.ID != "" {
		return sel.Where("?.public_id = ?", bun.Ident(alias), k.ID)
	}
	return sel.Where("?.? = ?", bun.Ident(alias), bun.Ident(labelColumn), k.Label)
}

// CreateOrganization inserts o and reads back the columns the database fills.
func CreateOrganization(ctx context.Context, db bun.IDB, o *model.Organization) error {
	_, err := db.NewInsert().Model(o).Returning("*").Exec(ctx)
	if violatesUnique(err, "organizations_account_id_label_key") {
		return ErrLabelTaken
	}
	if err != nil {
		return fmt.Errorf("insert organization: %w", err)
	}
	return nil
}

// FindOrganization returns the account's Organization with the key.
func FindOrganization(ctx context.Context, db bun.IDB, accountID int64, k validate.Key) (*model.Organization, error) {
	o := new(model.Organization)
	err := whereIDOrLabel(db.NewSelect().Model(o).Where("o.account_id = ?", accountID), "o", "label", k).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select organization: %w", err) // sql.ErrNoRows when there is none
	}
	return o, nil
}

// ListOrganizations returns a page of the account's Organizations and the total count.
func ListOrganizations(ctx context.Context, db bun.IDB, accountID int64, p ListParams) ([]model.Organization, int, error) {
	var orgs []model.Organization
	n, err := p.Apply(db.NewSelect().Model(&orgs).Where("o.account_id = ?", accountID)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list organizations: %w", err)
	}
	return orgs, int(n), nil
}

// UpdateOrganization writes the given columns of o.
func UpdateOrganization(ctx context.Context, db bun.IDB, o *model.Organization, columns []string) error {
	if len(columns) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model(o).Column(columns...).WherePK().Returning("*").Exec(ctx)
	if violatesUnique(err, "organizations_account_id_label_key") {
		return ErrLabelTaken
	}
	if err != nil {
		return fmt.Errorf("update organization: %w", err)
	}
	return nil
}

// DeleteOrganization deletes o; memberships go with it, Devices keep no organization.
func DeleteOrganization(ctx context.Context, db bun.IDB, o *model.Organization) error {
	if _, err := db.NewDelete().Model(o).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("delete organization: %w", err)
	}
	return nil
}

// ListRoles returns a page of the account's Roles and the total count.
func ListRoles(ctx context.Context, db bun.IDB, accountID int64, p ListParams) ([]model.Role, int, error) {
	var roles []model.Role
	n, err := p.Apply(db.NewSelect().Model(&roles).Where("r.account_id = ?", accountID)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list roles: %w", err)
	}
	return roles, int(n), nil
}

// FindRole returns the account's Role with the key.
func FindRole(ctx context.Context, db bun.IDB, accountID int64, k validate.Key) (*model.Role, error) {
	r := new(model.Role)
	err := whereIDOrLabel(db.NewSelect().Model(r).Where("r.account_id = ?", accountID), "r", "label", k).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select role: %w", err) // sql.ErrNoRows when there is none
	}
	return r, nil
}

// IDsByLabel maps the given labels of the account's rows in table (organizations or
// roles) to their internal ids; unknown labels are absent.
func IDsByLabel(ctx context.Context, db bun.IDB, table string, accountID int64, labels []string) (map[string]int64, error) {
	ids := make(map[string]int64, len(labels))
	if len(labels) == 0 {
		return ids, nil
	}
	var rows []struct {
		ID    int64  `bun:"id"`
		Label string `bun:"label"`
	}
	err := db.NewRaw("SELECT id, label FROM ? WHERE account_id = ? AND label IN (?)",
		bun.Ident(table), accountID, bun.List(labels)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", table, err)
	}
	for _, r := range rows {
		ids[r.Label] = r.ID
	}
	return ids, nil
}
