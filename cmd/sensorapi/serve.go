package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/pkg/api"
	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers"
)

func serveCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi serve

Runs the HTTP API and the MQTT broker (SENSORAPI_MQTT_ADDR, default :1883; empty
turns it off). Migrations are applied on start. With SENSORAPI_RETENTION_RAW or
SENSORAPI_RETENTION_ROLLUPS set it applies the retention at start and hourly (one
instance at a time; see sensorapi retention --help).

Without DATABASE_URL (make run) it starts a TimescaleDB container whose data lives in
the Docker volume SENSORAPI_DATA_VOLUME (default sensorapi-data), so it survives
restarts: the container (of the same name) is stopped on exit and started again next
time. It prints the admin token, kept in $XDG_CONFIG_HOME/sensorapi/admin-token
(~/.config/...) so that the same one is printed each time. make reset deletes all three.

Example:
  SENSORAPI_ADDR=:9090 DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres sensorapi serve
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	tuneGC()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	local := cfg.DatabaseURL == ""
	if local {
		stop, err := startLocalDatabase(ctx, &cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	db, err := openAndMigrate(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	tok, err := auth.Bootstrap(ctx, db, cfg.AdminToken)
	if err != nil {
		return err
	}
	switch {
	case local:
		printToken(cfg.AdminToken, "admin token", cfg.Addr)
	case tok != "":
		printToken(tok, "admin token (shown once)", cfg.Addr)
	}
	srv := &api.Server{DB: db, Config: cfg, Log: log, Metrics: metrics.New(db.Pool)}
	// The pipeline outlives ctx until HTTP has finished its requests (listen returns).
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err := srv.Start(bg); err != nil {
		stop()
		return err
	}
	defer func() { stop(); <-srv.Ingest.Done() }()
	if r := cfg.Retention; r.Enabled() {
		job := &retention.Job{Pool: db.Pool, Options: retention.Options{Raw: r.Raw, Rollups: r.Rollups},
			Metrics: srv.Metrics, Log: log, Cache: srv.Horizon}
		done := make(chan struct{})
		go func() { defer close(done); job.Loop(bg, retention.Every) }()
		defer func() { stop(); <-done }() // before the pool closes
	}
	if cfg.MQTT.Addr != "" || cfg.MQTT.TLSAddr != "" {
		broker, err := srv.StartMQTT(cfg.MQTT)
		if err != nil {
			return err
		}
		defer func() { _ = broker.Close() }()
		for _, a := range broker.Addrs() {
			log.Info("mqtt listening", "addr", a.String())
		}
	}
	if cfg.PprofAddr != "" {
		go servePprof(cfg.PprofAddr, log)
	}
	return listen(ctx, cfg.Addr, srv.Handler(), log)
}

// tuneGC trades memory for CPU unless GOGC or GOMEMLIMIT are set: the write path
// allocates per message, and with Go's default (GOGC=100) garbage collection took 15%
// of the server's CPU under make bench-fleet with a live heap of ~20 MiB. A larger
// GOGC collects less often; the memory limit makes it collect sooner when the heap
// nears it (docs/operations.md, "Tuning").
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(192 << 20)
	}
}

// servePprof serves Go's profiler (net/http/pprof) on its own listener, for operators
// measuring where time goes (docs/operations.md); bind it to loopback.
func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof listening", "addr", addr)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error("pprof listener", "addr", addr, "error", err.Error())
	}
}

// openAndMigrate connects and migrates, waiting up to two minutes for a database that
// is still starting.
func openAndMigrate(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.QueryTimeout)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		applied, err := store.Migrate(ctx, db)
		if err == nil {
			log.Info("schema migrated", "applied", applied)
			return db, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = db.Close()
			return nil, err
		}
		log.Warn("database not ready, retrying", "error", err.Error())
		time.Sleep(2 * time.Second)
	}
}

// listen serves until ctx ends (SIGTERM/SIGINT), then stops accepting and gives
// in-flight requests up to 30 s.
func listen(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("listening", "addr", addr)
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i:]
		}
	}
	return ":8080"
}

// printToken shows the admin token, a curl to try and the console's URL, which logs in
// through its fragment (a fragment never reaches the server).
func printToken(tok, what, addr string) {
	base := "http://127.0.0.1" + portOf(addr)
	fmt.Fprintf(os.Stderr, "\n%s: %s\ntry:     curl -H 'X-Auth-Token: %s' %s/api/v2.0/devices/\nconsole: %s/console/#token=%s\n\n",
		what, tok, tok, base, base, tok)
}

// startLocalDatabase starts the TimescaleDB container of `make run` and makes cfg use it
// and a saved admin token. The container and the Docker volume that holds its data are
// both named SENSORAPI_DATA_VOLUME (default sensorapi-data); stop stops the container,
// which the next start reuses, unless it was running before (another serve uses it).
func startLocalDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	vol := os.Getenv("SENSORAPI_DATA_VOLUME")
	if vol == "" {
		vol = "sensorapi-data"
	}
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
