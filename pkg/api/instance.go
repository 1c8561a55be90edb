package api

import (
	"context"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/mqtt"
	"github.com/sensordata/sensorapi/pkg/notify"
	"github.com/sensordata/sensorapi/pkg/retention"
	"github.com/sensordata/sensorapi/pkg/store"
)

// Start builds and runs what an instance keeps between requests: the LISTEN
// connection, the caches it invalidates, the ingestion pipeline and the replicas. They
// stop when ctx ends; call it once, before serving. Stop HTTP (and MQTT) first so that
// no message is queued after the pipeline's committers return.
func (s *Server) Start(ctx context.Context) error {
	replicas, err := store.NewReplicas(s.DB, s.Config.ReplicaURLs, s.Config.ReplicaMaxLag, s.Config.QueryTimeout,
		s.Metrics.Registry, s.Log)
	if err != nil {
		return err
	}
	s.Replicas = replicas
	go func() { <-ctx.Done(); replicas.Close() }()
	replicas.Run(ctx)

	inv := cache.NewRouter()
	s.Invalidations = inv
	s.Listener = notify.New(s.DB.Pool.Config().ConnConfig, s.Log, cache.Channel, notify.LastValueChannel)
	s.Listener.Handle(cache.Channel, func(payload string) {
		if err := inv.Dispatch(payload); err != nil {
			s.Log.Warn("unreadable invalidation", "error", err.Error())
		}
	})
	opts := func(name string) cache.Options {
		return cache.Options{Name: name, Size: s.Config.CacheSize, TTL: s.Config.CacheTTL,
			Live: s.Listener.Healthy, Lookups: s.Metrics.CacheLookups}
	}
	s.Tokens = auth.NewTokens(s.DB, opts("token"), inv)
	store := &ingest.Store{Pool: s.DB.Pool, Written: func(n int) { s.Metrics.ValuesIngested.Add(float64(n)) }}
	s.Horizon = retention.NewCache(s.DB.Pool, HorizonTTL)
	in := s.Config.Ingest
	s.Ingest = ingest.NewPipeline(store, ingest.PipelineConfig{
		BatchDots: in.BatchDots, QueueDots: in.QueueDots, QueueWait: in.QueueWait,
		Committers: in.Committers, CommitTimeout: s.Config.QueryTimeout, Horizon: s.writeHorizon,
	}, opts("device"), opts("variable"), inv, s.Metrics, s.Log)
	// a gap in notifications may have hidden any change: forget everything
	s.Listener.OnReset(s.Tokens.Purge)
	s.Listener.OnReset(s.Ingest.Purge)
	go s.Listener.Run(ctx)
	go s.Ingest.Run(ctx)
	return nil
}

// HorizonTTL is how long an instance reuses the raw horizon it read (retention.Cache).
const HorizonTTL = 5 * time.Second

// writeHorizon is the raw horizon writes are checked against. When it cannot be read
// (the database is failing: the write would fail too) writes go on with the last one
// known.
func (s *Server) writeHorizon(ctx context.Context) (time.Time, bool) {
	h, ok, err := s.Horizon.Get(ctx)
	if err != nil {
		s.Log.Warn("raw horizon unreadable; checking writes against the last one known", "error", err.Error())
	}
	return h, ok
}

// StartMQTT runs the embedded MQTT broker on this instance's caches, pipeline and
// listener (Start first), on the listeners c names. Close the broker before the
// pipeline stops.
func (s *Server) StartMQTT(c config.MQTT) (*mqtt.Broker, error) {
	b, err := mqtt.New(mqtt.Deps{Tokens: s.Tokens, Ingest: s.Ingest, Listener: s.Listener,
		Invalidations: s.Invalidations, Pool: s.DB.Pool, Metrics: s.Metrics, Log: s.Log,
		WriteTimeout: s.Config.QueryTimeout})
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

// readHorizon is the raw horizon for a read whose range starts at start (nil: at the
// first value): when retention removed values the range covers, the answer comes from
// the tiers before the horizon and says so in X-Raw-Horizon (API.md §16). nil when no
// value was removed, or the range lies after the horizon. When it cannot be read, the
// read goes on with the last one known, like writes.
func (s *Server) readHorizon(c *gin.Context, start *time.Time) *time.Time {
	h, ok := s.writeHorizon(c)
	if !ok || (start != nil && !start.Before(h)) {
		return nil
	}
	c.Header("X-Raw-Horizon", strconv.FormatInt(h.UnixMilli(), 10))
	return &h
}
