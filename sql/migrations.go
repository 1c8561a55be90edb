// Package migrations holds the schema as embedded *.up.sql files, applied in name order
// by bun/migrate (see pkg/store.Migrate), and River's own schema (20261126200001_river.go).
package migrations

import (
	"embed"

	"github.com/uptrace/bun/migrate"
)

//go:embed *.sql
var files embed.FS

// All returns the schema migrations.
func All() (*migrate.Migrations, error) {
	m := migrate.NewMigrations()
	if err := m.Discover(files); err != nil {
		return nil, err
	}
	registerRiver(m)
	return m, nil
}
