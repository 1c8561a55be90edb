// Package metrics holds the service's Prometheus collectors (API.md §11).
package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are registered on their own registry so tests can build several servers.
type Metrics struct {
	Registry       *prometheus.Registry
	Requests       *prometheus.CounterVec
	Duration       *prometheus.HistogramVec
	ValuesIngested prometheus.Counter

	// The ingestion pipeline (pkg/ingest) and the caches in front of it (pkg/cache).
	IngestBatchMessages prometheus.Histogram
	IngestCommitSeconds prometheus.Histogram
	IngestBatches       *prometheus.CounterVec // by result: committed, retried_alone
	IngestQueued        prometheus.Gauge       // dots queued or committing
	IngestRejected      prometheus.Counter     // messages refused with 503 for a full queue
	CacheLookups        *prometheus.CounterVec // by cache and result: hit, miss

	// The MQTT broker (pkg/mqtt).
	MQTTConnections prometheus.Gauge
	MQTTMessagesIn  prometheus.Counter     // publishes committed
	MQTTRejected    *prometheus.CounterVec // publishes refused, by reason
	MQTTDeliveries  prometheus.Counter     // last values sent to subscribers
	MQTTPubackSecs  prometheus.Histogram   // QoS 1: publish received → PUBACK sent

	// Retention (pkg/retention).
	RetentionHorizon       prometheus.Gauge       // raw horizon, unix seconds; 0: none
	RetentionRowsRemoved   prometheus.Counter     // raw rows removed by this instance's runs
	RetentionChunksDropped *prometheus.CounterVec // by table
	RetentionRuns          *prometheus.CounterVec // by result: ran, skipped, failed
}

// New registers the HTTP, ingestion, Go runtime and database pool collectors.
func New(pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		// route is the route pattern (never the raw path, which may hold labels), so the
		// label set stays bounded.
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sensorapi_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"route", "method"}),
		ValuesIngested: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sensorapi_values_ingested_total", Help: "Dots written (committed) by the ingestion routes.",
		}),
	}
	m.newIngestion()
	m.newMQTT()
	m.newRetention()
	m.Registry.MustRegister(m.RetentionHorizon, m.RetentionRowsRemoved, m.RetentionChunksDropped, m.RetentionRuns,
		m.Requests, m.Duration, m.ValuesIngested,
		m.IngestBatchMessages, m.IngestCommitSeconds, m.IngestBatches, m.IngestQueued, m.IngestRejected, m.CacheLookups,
		m.MQTTConnections, m.MQTTMessagesIn, m.MQTTRejected, m.MQTTDeliveries, m.MQTTPubackSecs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool != nil {
		m.Registry.MustRegister(poolCollector(pool)...)
	}
	return m
}

func poolCollector(pool *pgxpool.Pool) []prometheus.Collector {
	gauge := func(name, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sensorapi_db_pool_" + name, Help: help},
			func() float64 { return f(pool.Stat()) })
	}
	counter := func(name, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sensorapi_db_pool_" + name, Help: help},
			func() float64 { return f(pool.Stat()) })
	}
	return []prometheus.Collector{
		gauge("total_conns", "Connections open.", func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		gauge("acquired_conns", "Connections in use.", func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		gauge("idle_conns", "Idle connections.", func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		gauge("max_conns", "Pool size.", func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		counter("acquire_wait_seconds_total", "Time spent waiting for a connection.",
			func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		counter("empty_acquire_total", "Acquires that had to wait for a connection.",
			func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
	}
}

func (m *Metrics) newIngestion() {
	m.IngestBatchMessages = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sensorapi_ingest_batch_messages", Help: "Messages committed together in one ingestion batch.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	m.IngestCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sensorapi_ingest_commit_seconds", Help: "Duration of one ingestion batch's transaction.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	m.IngestBatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sensorapi_ingest_batches_total",
		Help: "Ingestion batches by result: committed, or failed and retried message by message.",
	}, []string{"result"})
	m.IngestQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sensorapi_ingest_queued_dots", Help: "Dots waiting in the ingestion queue or being committed.",
	})
	m.IngestRejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sensorapi_ingest_rejected_total", Help: "Messages refused (503) because the ingestion queue stayed full.",
	})
	m.CacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sensorapi_cache_lookups_total", Help: "Cache lookups by cache (token, device, variable) and result.",
	}, []string{"cache", "result"})
}

func (m *Metrics) newMQTT() {
	m.MQTTConnections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sensorapi_mqtt_connections", Help: "MQTT connections authenticated and open.",
	})
	m.MQTTMessagesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sensorapi_mqtt_messages_total", Help: "MQTT publishes whose dots were committed.",
	})
	m.MQTTRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sensorapi_mqtt_rejected_total",
		Help: "MQTT connections and publishes refused, by reason: credentials, payload, topic, scope, disabled, unavailable.",
	}, []string{"reason"})
	m.MQTTDeliveries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sensorapi_mqtt_deliveries_total", Help: "Last values sent to MQTT subscribers.",
	})
	m.MQTTPubackSecs = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sensorapi_mqtt_puback_seconds", Help: "QoS 1 publishes: from receipt to PUBACK (the commit).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
}

func (m *Metrics) newRetention() {
	m.RetentionHorizon = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sensorapi_retention_raw_horizon_seconds",
		Help: "The raw horizon (unix seconds): the oldest timestamp still held raw; 0 while nothing was dropped.",
	})
	m.RetentionRowsRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sensorapi_retention_rows_removed_total", Help: "Raw values removed by retention runs of this instance.",
	})
	m.RetentionChunksDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sensorapi_retention_chunks_dropped_total", Help: "Chunks dropped by retention runs of this instance, by hypertable.",
	}, []string{"table"})
	m.RetentionRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sensorapi_retention_runs_total",
		Help: "Retention runs by result: ran, skipped (another instance held the lock), failed.",
	}, []string{"result"})
}
