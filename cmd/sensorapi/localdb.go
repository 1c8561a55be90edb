//go:build !dev

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sensordata/sensorapi/pkg/config"
)

// startLocalDatabase is in development builds only (localdb_dev.go): the binary that
// ships starts no container and links no Docker client.
func startLocalDatabase(context.Context, *config.Config, *slog.Logger) (func(), error) {
	return nil, errors.New("DATABASE_URL is not set: point it at PostgreSQL with TimescaleDB " +
		"(postgres://user:password@host:5432/db), or use `make run`, whose development build starts one in Docker")
}
