package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/values"
)

// Serve runs the service on cfg until ctx ends (SIGTERM/SIGINT): it connects and
// migrates (waiting for a database that is still starting), bootstraps the admin
// account (announce gets the token, or "" when none was made now: API.md §1), starts
// the instance with its retention job, the MQTT broker and the HTTP listener, and on
// the way out stops them in order: HTTP and MQTT first, then every goroutine of the
// instance (pipeline, followers, background loops), then the pool.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger, announce func(token string)) error {
	db, err := openAndMigrate(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	tok, err := auth.Bootstrap(ctx, db, cfg.AdminToken)
	if err != nil {
		return err
	}
	announce(tok)
	// The instance outlives ctx until HTTP has finished its requests (listen returns).
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	in, err := Start(bg, db, cfg, log)
	if err != nil {
		stop()
		return err
	}
	defer func() { stop(); <-in.Done() }() // every goroutine of it, before the pool closes
	if r := cfg.Retention; r.Enabled() {
		job := &retention.Job{Pool: db.Pool, Options: retention.Options{Raw: r.Raw, Rollups: r.Rollups},
			Metrics: in.Metrics, Log: log, Cache: in.Horizon}
		in.spawn(bg, "retention", func(ctx context.Context) { job.Loop(ctx, retention.Every) })
	}
	if cfg.PackAfter > 0 {
		packer := &values.Packer{Store: &values.Store{Pool: db.Pool}, After: cfg.PackAfter, Log: log}
		in.spawn(bg, "packer", func(ctx context.Context) { packer.Loop(ctx, values.PackEvery) })
	}
	if cfg.MQTT.Addr != "" || cfg.MQTT.TLSAddr != "" {
		broker, err := in.StartMQTT(cfg.MQTT)
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
	return listen(ctx, cfg.Addr, in.Handler(), log)
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
// is still starting (not for one that is not UTF8: waiting cannot change that).
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
		if time.Now().After(deadline) || ctx.Err() != nil || errors.Is(err, store.ErrNotUTF8) {
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
