//go:build dev

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/testcontainers"
)

// This file is in development builds only (`go build -tags dev`, what `make run`
// builds): serve without DATABASE_URL starts a TimescaleDB container. The binary that
// ships (make build, make image) has no Docker code in it.

// startLocalDatabase starts the TimescaleDB container of `make run` and makes cfg use it
// and a saved admin token. The container and the Docker volume that holds its data are
// both named SENSORAPI_DATA_VOLUME (default sensorapi-data); stop stops the container,
// which the next start reuses, unless it was running before (another serve uses it).
func startLocalDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	vol := cfg.DataVolume
	log.Info("DATABASE_URL is not set: starting the TimescaleDB container (or the kept one); its data lives in a Docker volume",
		"container", vol, "volume", vol)
	tsdb, err := testcontainers.Start(ctx, testcontainers.Options{Volume: vol, Name: vol})
	if err != nil {
		return nil, fmt.Errorf("start TimescaleDB: %w", err)
	}
	stop := func() {
		if tsdb.WasRunning { // another serve (a second make run) still uses it
			log.Info("leaving the TimescaleDB container running: it was running before this serve", "container", vol)
			return
		}
		if err := tsdb.Stop(context.Background()); err != nil {
			log.Warn("stop the TimescaleDB container", "container", vol, "error", err.Error())
		}
	}
	log.Info("TimescaleDB container started", "image", tsdb.Image, "dsn", tsdb.DSN)
	cfg.DatabaseURL = tsdb.DSN
	if cfg.AdminToken == "" {
		if cfg.AdminToken, err = savedAdminToken(); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// savedAdminToken reads the local admin token, making and saving one (mode 0600) the
// first time.
func savedAdminToken() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	path := filepath.Join(dir, "sensorapi", "admin-token")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	tok, err := auth.NewToken()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}
