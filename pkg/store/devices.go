package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// ErrNotFound is returned when a key matches no row of the account.
var ErrNotFound = errors.New("not found")

// DeviceFields are the filterable and sortable fields of the Device list (API.md §3).
var DeviceFields = map[string]Field{
	"id":                  {Column: "d.public_id", Kind: ID},
	"label":               {Column: "d.label", Kind: Text, Sortable: true, Searchable: true},
	"name":                {Column: "d.name", Kind: Text, Sortable: true, Searchable: true},
	"description":         {Column: "d.description", Kind: Text},
	"isActive":            {Column: "d.is_active", Kind: Bool},
	"tags":                {Column: "d.tags", Kind: Array},
	"lastActivity":        {Column: "d.last_activity", Kind: Time, Sortable: true},
	"createdAt":           {Column: "d.created_at", Kind: Time, Sortable: true},
	"variablesNumber":     {Column: "d.variables_number", Kind: Int, Sortable: true},
	"organization":        {Column: "o.public_id", Kind: ID},
	"organization__id":    {Column: "o.public_id", Kind: ID},
	"organization__label": {Column: "o.label", Kind: Text},
	"variables__id":       {Column: "v.public_id", Kind: ID, Via: viaVariables},
	"variables__label":    {Column: "v.label", Kind: Text, Via: viaVariables},
}

// viaVariables filters Devices by their Variables; the unique index on
// variables.public_id makes variables__id__in a few index lookups.
const viaVariables = "d.id IN (SELECT v.device_id FROM variables v WHERE %s)"

// selectDevices is the Device read of one account, with its Organization's fields.
func selectDevices(db bun.IDB, accountID int64, dest any) *bun.SelectQuery {
	return deviceRows(db.NewSelect().Model(dest), accountID).ColumnExpr("d.*").
		ColumnExpr("o.public_id AS org_public_id, o.label AS org_label, o.name AS org_name")
}

// deviceRows scopes a select of devices (alias d) to the account and joins the
// Organization (alias o).
func deviceRows(q *bun.SelectQuery, accountID int64) *bun.SelectQuery {
	return q.
		Join("LEFT JOIN organizations AS o ON o.id = d.organization_id").
		Where("d.account_id = ?", accountID)
}

// ListDevices returns one page of the account's Devices and the count of all matches.
func ListDevices(ctx context.Context, db bun.IDB, accountID int64, p ListParams) ([]model.Device, int, error) {
	devices := []model.Device{}
	base := func() *bun.SelectQuery { return deviceRows(db.NewSelect().TableExpr("devices AS d"), accountID) }
	n, err := ScanPage(ctx, p, base, "d.id", selectDevices(db, accountID, &devices))
	if err != nil {
		return nil, 0, fmt.Errorf("list devices: %w", err)
	}
	return devices, n, nil
}

// GetDevice reads the account's Device with key (id or ~label). forUpdate locks the row
// for the caller's transaction.
func GetDevice(ctx context.Context, db bun.IDB, accountID int64, key validate.Key, forUpdate bool) (*model.Device, error) {
	d := new(model.Device)
	q := selectDevices(db, accountID, d)
	if key.ID != "" {
		q = q.Where("d.public_id = ?", key.ID)
	} else {
		q = q.Where("d.label = ?", key.Label)
	}
	if forUpdate {
		q = q.For("UPDATE OF d")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("get device %q: %w", key.Raw, err)
	}
	return d, nil
}

// deviceColumns are the columns a create or update writes.
var deviceColumns = []string{"label", "name", "description", "is_active", "organization_id", "tags", "properties"}

// InsertDevice creates d and fills its generated id, public id and createdAt.
func InsertDevice(ctx context.Context, db bun.IDB, d *model.Device) error {
	_, err := db.NewInsert().Model(d).Column(append(deviceColumns, "account_id")...).
		Returning("id, public_id, created_at").Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert device: %w", err)
	}
	return nil
}

// UpdateDevice writes the editable columns of d.
func UpdateDevice(ctx context.Context, db bun.IDB, d *model.Device) error {
	_, err := db.NewUpdate().Model(d).Column(deviceColumns...).WherePK().Exec(ctx)
	if err != nil {
		return fmt.Errorf("update device: %w", err)
	}
	return nil
}

// DeleteDevice removes a Device, its Variables (by cascade), their values and rollup
// tiers (hypertables have no foreign keys), in the caller's transaction.
func DeleteDevice(ctx context.Context, tx bun.Tx, id int64) error {
	var vars []int64
	if err := tx.NewSelect().TableExpr("variables").Column("id").Where("device_id = ?", id).Scan(ctx, &vars); err != nil {
		return fmt.Errorf("list device variables: %w", err)
	}
	if err := deleteValues(ctx, tx, vars); err != nil {
		return fmt.Errorf("delete device: %w", err)
	}
	if _, err := tx.NewDelete().TableExpr("devices").Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete device: %w", err)
	}
	return nil
}

// OrganizationID resolves an Organization key of the account to its internal id.
func OrganizationID(ctx context.Context, db bun.IDB, accountID int64, key validate.Key) (int64, error) {
	q := db.NewSelect().TableExpr("organizations").Column("id").Where("account_id = ?", accountID)
	if key.ID != "" {
		q = q.Where("public_id = ?", key.ID)
	} else {
		q = q.Where("label = ?", key.Label)
	}
	var id int64
	if err := q.Scan(ctx, &id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, ErrNotFound
		}
		return 0, fmt.Errorf("find organization %q: %w", key.Raw, err)
	}
	return id, nil
}

// IsUniqueViolation tells whether err broke the named unique constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// InsertDevices creates the Devices of one account in one statement and fills their
// generated ids (GetDevicesByID reads them back). A Device whose label the account already has
// (one created since the caller looked, too) is skipped, not an error: the result lists
// the indexes of ds that were skipped, for the caller to refuse by item.
func InsertDevices(ctx context.Context, db bun.IDB, ds []*model.Device) ([]int, error) {
	var created []struct {
		Label string
		ID    int64
	}
	_, err := db.NewInsert().Model(&ds).Column(append(deviceColumns, "account_id")...).
		On("CONFLICT (account_id, label) DO NOTHING").
		Returning("label, id").Exec(ctx, &created)
	if err != nil {
		return nil, fmt.Errorf("insert devices: %w", err)
	}
	ids := make(map[string]int64, len(created))
	for _, c := range created {
		ids[c.Label] = c.ID
	}
	var skipped []int
	for i, d := range ds {
		if d.ID = ids[d.Label]; d.ID == 0 {
			skipped = append(skipped, i)
		}
	}
	return skipped, nil
}

// GetDevicesByID reads the account's Devices with these internal ids, in that order.
func GetDevicesByID(ctx context.Context, db bun.IDB, accountID int64, ids []int64) ([]*model.Device, error) {
	var found []*model.Device
	if err := selectDevices(db, accountID, &found).Where("d.id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("get devices: %w", err)
	}
	byID := make(map[int64]*model.Device, len(found))
	for _, d := range found {
		byID[d.ID] = d
	}
	out := make([]*model.Device, len(ids))
	for i, id := range ids {
		if out[i] = byID[id]; out[i] == nil {
			return nil, fmt.Errorf("get devices: %d: %w", id, ErrNotFound)
		}
	}
	return out, nil
}
