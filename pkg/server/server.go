// Package server builds one running instance of the service from its configuration:
// the database handles and replicas, the notification listener and the caches it
// invalidates, the ingestion pipeline, and in front of them, side by side, the HTTP
// API (pkg/api) and the MQTT broker (pkg/mqtt). `sensorapi serve` only calls Serve;
// tests start an Instance on their own database with Start.
package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/sensordata/sensorapi/pkg/api"
	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/budget"
	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/events"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/mqtt"
	"github.com/sensordata/sensorapi/pkg/notify"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/synthetic"
)

// Instance is what one instance keeps between requests, shared by HTTP and MQTT: the
// HTTP API's server (its handlers' dependencies, promoted here) and what only the
// instance needs.
type Instance struct {
	*api.Server
	Listener      *notify.Listener
	Invalidations *cache.Router
	Events        *events.Service // event conditions and deliveries; Done when stopped
}

// HorizonTTL is how long an instance reuses the raw horizon and the rollup tiles' mark
// it read (retention.Cache, api.Server.Rollups).
const HorizonTTL = 5 * time.Second

// Start builds and runs an instance on db: the replicas, the LISTEN connection, the
// caches it invalidates and the ingestion pipeline. They stop when ctx ends; stop HTTP
// (and MQTT) first so that no message is queued after the pipeline's committers return
// (Ingest.Done tells when they have).
func Start(ctx context.Context, db *store.DB, cfg config.Config, log *slog.Logger) (*Instance, error) {
	in := &Instance{Server: &api.Server{DB: db, Config: cfg, Log: log, Metrics: metrics.New(db.Pool)}}
	replicas, err := store.NewReplicas(db, cfg.ReplicaURLs, cfg.ReplicaMaxLag, cfg.QueryTimeout, in.Metrics.Registry, log)
	if err != nil {
		return nil, err
	}
	in.Replicas = replicas
	go func() { <-ctx.Done(); replicas.Close() }()
	replicas.Run(ctx)

	in.Invalidations = cache.NewRouter()
	in.Listener = notify.New(db.Pool.Config().ConnConfig, log, cache.Channel, notify.LastValueChannel)
	in.Listener.Handle(cache.Channel, func(payload string) {
		if err := in.Invalidations.Dispatch(payload); err != nil {
			log.Warn("unreadable invalidation", "error", err.Error())
		}
	})
	in.Tokens = auth.NewTokens(db, in.cacheOptions("token"), in.Invalidations)
	in.Tokens.Timeout = cfg.QueryTimeout
	in.Horizon = retention.NewCache(db.Pool, HorizonTTL)
	in.Rollups = cache.NewValue(HorizonTTL, func(ctx context.Context) (time.Time, error) { return ingest.RollupsUntil(ctx, db.Pool) })
	in.Budget = budget.New(db.Pool, cfg.WriteStopSize, in.Metrics.Registry, log)
	if cfg.Retention.Size > 0 {
		in.Budget.Retention = &budget.SizeRetention{Size: cfg.Retention.Size,
			Job: retention.Job{Pool: db.Pool, Metrics: in.Metrics, Log: log, Cache: in.Horizon}}
	}
	go in.Budget.Run(ctx)
	in.Ingest = in.newPipeline()
	in.Synthetic = synthetic.NewUpkeep(db.Pool, log, in.Metrics.Registry)
	in.Ingest.Follow(in.Synthetic)
	in.Invalidations.On("synthetic", func(cache.Invalidation) { in.Synthetic.Invalidated() })
	in.Listener.OnReset(in.Synthetic.Invalidated)
	go in.Synthetic.Run(ctx)
	if in.Events, err = events.New(events.Deps{Pool: db.Pool, Writer: in.Ingest, Invalidations: in.Invalidations,
		Registry: in.Metrics.Registry, Log: log, Config: cfg.Events, QueryTimeout: cfg.QueryTimeout}); err != nil {
		return nil, err
	}
	in.Ingest.Follow(in.Events)
	in.EventsChanged = in.Events.Refresh
	in.Listener.OnReset(in.Events.Reload)
	// a gap in notifications may have hidden any change: forget everything
	in.Listener.OnReset(in.Tokens.Purge)
	in.Listener.OnReset(in.Ingest.Purge)
	go in.Listener.Run(ctx)
	go in.Ingest.Run(ctx)
	go in.Events.Run(ctx)
	go (&ingest.Store{Pool: db.Pool}).CatchUpLoop(ctx, log)
	return in, nil
}

// cacheOptions are the settings of one of the instance's caches, live while the
// listener is.
func (in *Instance) cacheOptions(name string) cache.Options {
	return cache.Options{Name: name, Size: in.Config.CacheSize, TTL: in.Config.CacheTTL,
		Live: in.Listener.Healthy, Lookups: in.Metrics.CacheLookups}
}

// newPipeline is the one ingestion pipeline of the instance, for HTTP and MQTT alike.
func (in *Instance) newPipeline() *ingest.Pipeline {
	st := &ingest.Store{Pool: in.DB.Pool, Log: in.Log,
		Written: func(n int) { in.Metrics.ValuesIngested.Add(float64(n)) }}
	c := in.Config.Ingest
	return ingest.NewPipeline(st, ingest.PipelineConfig{
		BatchDots: c.BatchDots, QueueDots: c.QueueDots, QueueWait: c.QueueWait,
		Committers: c.Committers, CommitTimeout: in.Config.QueryTimeout, Admit: in.Budget.Admit,
		Horizon: func(ctx context.Context) (time.Time, bool) { return in.Horizon.Known(ctx, in.Log) },
	}, in.cacheOptions("device"), in.cacheOptions("variable"), in.Invalidations, in.Metrics, in.Log)
}

// StartMQTT runs the embedded MQTT broker beside the HTTP API, on the same caches,
// pipeline and listener, on the listeners c names. Close the broker before the
// pipeline stops.
func (in *Instance) StartMQTT(c config.MQTT) (*mqtt.Broker, error) {
	b, err := mqtt.New(mqtt.Deps{Tokens: in.Tokens, Ingest: in.Ingest, Listener: in.Listener,
		Invalidations: in.Invalidations, Pool: in.DB.Pool, Metrics: in.Metrics, Log: in.Log,
		WriteTimeout: in.Config.QueryTimeout})
	if err != nil {
		return nil, err
	}
	if err := b.Listen(c); err != nil {
		_ = b.Close()
		return nil, err
	}
	if err := b.Serve(); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}
