// Package server builds one running instance of the service from its configuration:
// the database handles and replicas, the notification listener and the caches it
// invalidates, the ingestion pipeline, and in front of them, side by side, the HTTP
// API (pkg/api) and the MQTT broker (pkg/mqtt). `sensorapi serve` only calls Serve;
// `sensorapi load` writes through an instance without either (StartWriter); tests
// start an Instance on their own database with Start.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
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
	"github.com/sensordata/sensorapi/pkg/values"
)

// Instance is what one instance keeps between requests, shared by HTTP and MQTT: the
// HTTP API's server (its handlers' dependencies, promoted here) and what only the
// instance needs.
type Instance struct {
	*api.Server
	Listener      *notify.Listener
	Invalidations *cache.Router
	Events        *events.Service // event conditions and deliveries

	running sync.WaitGroup // every goroutine the instance started (spawn)
	done    chan struct{}  // closed once ctx ended and running is zero
}

// HorizonTTL is how long an instance reuses the raw horizon and the rollup tiles' mark
// it read (retention.Cache, api.Server.Rollups).
const HorizonTTL = 5 * time.Second

// Start builds and runs an instance on db: the replicas, the LISTEN connection, the
// caches it invalidates, the ingestion pipeline and its followers (synthetic upkeep,
// event evaluations and deliveries), the storage budget and the rollups' catch-up.
// They stop when ctx ends; stop HTTP (and MQTT) first so that no message is queued
// after the pipeline's committers return, and close the pool only once Done is.
func Start(ctx context.Context, db *store.DB, cfg config.Config, log *slog.Logger) (*Instance, error) {
	return start(ctx, db, cfg, log, true)
}

// StartWriter is Start for a process that only writes and then exits (`sensorapi
// load`): the same pipeline and followers, so its writes mean what any write means,
// but no event deliveries. Those are left in the queue that every serving instance
// works (a delivery retried for hours needs a process that stays); Settle does the
// rest of what the writes left to do before the process exits.
func StartWriter(ctx context.Context, db *store.DB, cfg config.Config, log *slog.Logger) (*Instance, error) {
	return start(ctx, db, cfg, log, false)
}

// start builds the instance, reads the synthetic graph (so that the first write to a
// synthetic variable is refused already), then starts its goroutines.
func start(ctx context.Context, db *store.DB, cfg config.Config, log *slog.Logger, deliver bool) (*Instance, error) {
	in, err := build(db, cfg, log, deliver)
	if err != nil {
		return nil, err
	}
	if err := in.Synthetic.Load(ctx); err != nil {
		in.Replicas.Close()
		return nil, err
	}
	in.run(ctx)
	return in, nil
}

// build makes the instance's parts and wires them; nothing runs yet.
func build(db *store.DB, cfg config.Config, log *slog.Logger, deliver bool) (*Instance, error) {
	in := &Instance{Server: &api.Server{DB: db, Config: cfg, Log: log, Metrics: metrics.New(db.Pool)}, done: make(chan struct{})}
	replicas, err := store.NewReplicas(db, cfg.ReplicaURLs, cfg.ReplicaMaxLag, cfg.QueryTimeout, in.Metrics.Registry, log)
	if err != nil {
		return nil, err
	}
	in.Replicas = replicas
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
	in.Rollups = cache.NewValue(HorizonTTL, func(ctx context.Context) (time.Time, error) { return values.RollupsUntil(ctx, db.Pool) })
	in.Budget = budget.New(db.Pool, cfg.WriteStopSize, in.Metrics.Registry, log)
	if cfg.Retention.Size > 0 {
		in.Budget.Retention = &budget.SizeRetention{Size: cfg.Retention.Size,
			Job: retention.Job{Pool: db.Pool, Metrics: in.Metrics, Log: log, Cache: in.Horizon}}
	}
	if err := in.buildWritePath(deliver); err != nil {
		replicas.Close()
		return nil, err
	}
	// a gap in notifications may have hidden any change: forget everything
	in.Listener.OnReset(in.Tokens.Purge)
	in.Listener.OnReset(in.Ingest.Purge)
	return in, nil
}

// buildWritePath makes the ingestion pipeline and its followers: the synthetic upkeep
// and the event service (deliver: with its deliveries).
func (in *Instance) buildWritePath(deliver bool) error {
	in.Ingest = in.newPipeline()
	in.Synthetic = synthetic.NewUpkeep(in.DB.Pool, in.Log, in.Metrics.Registry)
	in.Ingest.Follow(in.Synthetic)
	in.Invalidations.On("synthetic", func(cache.Invalidation) { in.Synthetic.Invalidated() })
	in.Listener.OnReset(in.Synthetic.Invalidated)
	var err error
	if in.Events, err = events.New(events.Deps{Pool: in.DB.Pool, Writer: in.Ingest, Invalidations: in.Invalidations,
		Registry: in.Metrics.Registry, Log: in.Log, Config: in.Config.Events, QueryTimeout: in.Config.QueryTimeout,
		Deliver: deliver}); err != nil {
		return err
	}
	in.Ingest.Follow(in.Events)
	in.EventsChanged = in.Events.Refresh
	in.Listener.OnReset(in.Events.Reload)
	return nil
}

// run starts the instance's goroutines, each until ctx ends, and closes Done once
// ctx has ended and all have returned.
func (in *Instance) run(ctx context.Context) {
	in.spawn(ctx, "replicas", in.Replicas.Run)
	in.spawn(ctx, "budget", in.Budget.Run)
	in.spawn(ctx, "synthetic", in.Synthetic.Run)
	in.spawn(ctx, "synthetic-graph", in.Synthetic.Reread)
	in.spawn(ctx, "listener", in.Listener.Run)
	in.spawn(ctx, "ingest", in.Ingest.Run)
	in.spawn(ctx, "events", in.Events.Run)
	in.spawn(ctx, "rollups", func(ctx context.Context) { (&values.Store{Pool: in.DB.Pool}).CatchUpLoop(ctx, in.Log) })
	go func() {
		<-ctx.Done() // spawn is called before ctx ends, Wait after
		in.running.Wait()
		close(in.done)
	}()
}

// spawn runs f in a goroutine of the instance, which Done waits for. Its goroutines
// carry the label component=<name> in goroutine profiles (pprof), where they tell
// which part of the instance they are. ctx is the instance's (Start's) or ends with
// it; call spawn before it ends.
func (in *Instance) spawn(ctx context.Context, name string, f func(context.Context)) {
	in.running.Go(func() { pprof.Do(ctx, pprof.Labels("component", name), f) })
}

// Done is closed once ctx has ended and every goroutine the instance started has
// returned: nothing of the instance uses the pool any more, which may close then.
func (in *Instance) Done() <-chan struct{} { return in.done }

// cacheOptions are the settings of one of the instance's caches, live while the
// listener is.
func (in *Instance) cacheOptions(name string) cache.Options {
	return cache.Options{Name: name, Size: in.Config.CacheSize, TTL: in.Config.CacheTTL,
		Live: in.Listener.Healthy, Lookups: in.Metrics.CacheLookups}
}

// newPipeline is the one ingestion pipeline of the instance, for HTTP and MQTT alike.
func (in *Instance) newPipeline() *ingest.Pipeline {
	st := &values.Store{Pool: in.DB.Pool, Log: in.Log}
	c := in.Config.Ingest
	return ingest.NewPipeline(st, ingest.PipelineConfig{
		BatchDots: c.BatchDots, QueueDots: c.QueueDots, QueueWait: c.QueueWait,
		Committers: c.Committers, CommitTimeout: in.Config.QueryTimeout, Admit: in.Budget.Admit,
		Horizon: func(ctx context.Context) (time.Time, bool) { return in.Horizon.Known(ctx, in.Log) },
		Written: func(n int) { in.Metrics.ValuesIngested.Add(float64(n)) },
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

// Settle does now, once the instance has stopped (Done), what its writes left to its
// followers, for a process that exits next (`sensorapi load`): the synthetic
// recomputes that are due, chains included, then the evaluations of the events behind
// their variables' last values, which queue their deliveries. Left over are only
// recomputes another instance is doing and ones that failed (logged, retried later by
// any instance with backoff).
func (in *Instance) Settle(ctx context.Context) error {
	if err := in.Synthetic.Drain(ctx); err != nil {
		return fmt.Errorf("synthetic recomputes: %w", err)
	}
	if err := in.Events.CatchUp(ctx); err != nil {
		return fmt.Errorf("event evaluations: %w", err)
	}
	return nil
}
