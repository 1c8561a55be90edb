package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/model"
)

// ErrUsernameTaken means a User of any account has the username (case-insensitively).
var ErrUsernameTaken = errors.New("username already used")

// UserFields are the list filters and sort keys of Users.
var UserFields = map[string]Field{
	"id":        {Column: "u.public_id", Kind: ID},
	"username":  {Column: "u.username", Kind: Text, Sortable: true, Searchable: true},
	"email":     {Column: "u.email", Kind: Text, Sortable: true, Searchable: true},
	"firstName": {Column: "u.first_name", Kind: Text, Sortable: true, Searchable: true},
	"lastName":  {Column: "u.last_name", Kind: Text, Sortable: true, Searchable: true},
	"isActive":  {Column: "u.is_active", Kind: Bool},
	"tags":      {Column: "u.tags", Kind: Array},
	"createdAt": {Column: "u.created_at", Kind: Time, Sortable: true},
}

// UserKey is a parsed user key: an id, or a ~username.
type UserKey struct{ ID, Username string }

// usernameIndex is the unique index on lower(username).
const usernameIndex = "users_username_key"

// CreateUser inserts u and reads back the columns the database fills.
func CreateUser(ctx context.Context, db bun.IDB, u *model.User) error {
	_, err := db.NewInsert().Model(u).ExcludeColumn("password_updated_at", "created_at", "last_login").
		Returning("*").Exec(ctx)
	if violatesUnique(err, usernameIndex) {
		return ErrUsernameTaken
	}
	if err != nil {
		return fmt.Errorf("insert user: %w", err)
	}
	return nil
}

// FindUser returns the account's User with the key, its Organizations loaded.
func FindUser(ctx context.Context, db bun.IDB, accountID int64, k UserKey) (*model.User, error) {
	u := new(model.User)
	sel := db.NewSelect().Model(u).Where("u.account_id = ?", accountID)
	if k.ID != "" {
		sel = sel.Where("u.public_id = ?", k.ID)
	} else {
		sel = sel.Where("lower(u.username) = lower(?)", k.Username)
	}
	err := sel.Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select user: %w", err) // sql.ErrNoRows when there is none
	}
	if err := loadMemberships(ctx, db, []*model.User{u}); err != nil {
		return nil, err
	}
	return u, nil
}

// ListUsers returns a page of the account's Users, Organizations loaded, and the total.
func ListUsers(ctx context.Context, db bun.IDB, accountID int64, p ListParams) ([]model.User, int, error) {
	var users []model.User
	n, err := p.Apply(db.NewSelect().Model(&users).Where("u.account_id = ?", accountID)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list users: %w", err)
	}
	ptrs := make([]*model.User, len(users))
	for i := range users {
		ptrs[i] = &users[i]
	}
	if err := loadMemberships(ctx, db, ptrs); err != nil {
		return nil, 0, err
	}
	return users, int(n), nil
}

// UpdateUser writes the given columns of u and reloads its Organizations.
func UpdateUser(ctx context.Context, db bun.IDB, u *model.User, columns []string) error {
	if len(columns) > 0 {
		_, err := db.NewUpdate().Model(u).Column(columns...).WherePK().Returning("*").Exec(ctx)
		if violatesUnique(err, usernameIndex) {
			return ErrUsernameTaken
		}
		if err != nil {
			return fmt.Errorf("update user: %w", err)
		}
	}
	return loadMemberships(ctx, db, []*model.User{u})
}

// DeleteUser deletes u and its memberships.
func DeleteUser(ctx context.Context, db bun.IDB, u *model.User) error {
	if _, err := db.NewDelete().Model(u).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	return nil
}

// Assignment is an Organization to put a User in, with the Role there.
type Assignment struct{ OrganizationID, RoleID int64 }

// AssignOrganizations adds the User to each Organization, or changes its Role there.
func AssignOrganizations(ctx context.Context, db bun.IDB, userID int64, as []Assignment) error {
	for _, a := range as {
		_, err := db.NewRaw(`INSERT INTO user_organizations (user_id, organization_id, role_id)
			VALUES (?, ?, ?) ON CONFLICT (user_id, organization_id) DO UPDATE SET role_id = EXCLUDED.role_id`,
			userID, a.OrganizationID, a.RoleID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("assign organization: %w", err)
		}
	}
	return nil
}

// RemoveOrganizations takes the User out of the Organizations (roles are ignored).
func RemoveOrganizations(ctx context.Context, db bun.IDB, userID int64, as []Assignment) error {
	if len(as) == 0 {
		return nil
	}
	orgIDs := make([]int64, len(as))
	for i, a := range as {
		orgIDs[i] = a.OrganizationID
	}
	_, err := db.NewRaw("DELETE FROM user_organizations WHERE user_id = ? AND organization_id IN (?)",
		userID, bun.List(orgIDs)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("remove organizations: %w", err)
	}
	return nil
}

// loadMemberships fills the Organizations of the users in one query, oldest membership
// first (the order they were assigned).
func loadMemberships(ctx context.Context, db bun.IDB, users []*model.User) error {
	if len(users) == 0 {
		return nil
	}
	byID := make(map[int64]*model.User, len(users))
	ids := make([]int64, len(users))
	for i, u := range users {
		byID[u.ID], ids[i] = u, u.ID
		u.Organizations = nil
	}
	var ms []model.Membership
	err := db.NewRaw(`SELECT uo.user_id,
			o.public_id AS org_public_id, o.label AS org_label, o.name AS org_name,
			o.properties AS org_properties, o.created_at AS org_created_at,
			r.public_id AS role_public_id, r.label AS role_label, r.name AS role_name,
			r.created_at AS role_created_at
		FROM user_organizations uo
		JOIN organizations o ON o.id = uo.organization_id
		JOIN roles r ON r.id = uo.role_id
		WHERE uo.user_id IN (?)
		ORDER BY uo.created_at, o.id`, bun.List(ids)).Scan(ctx, &ms)
	if err != nil {
		return fmt.Errorf("load memberships: %w", err)
	}
	for _, m := range ms {
		u := byID[m.UserID]
		u.Organizations = append(u.Organizations, m)
	}
	return nil
}
