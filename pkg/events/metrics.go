package events

import "github.com/prometheus/client_golang/prometheus"

// metrics are the events' collectors (API.md §18), on the instance's registry.
type metrics struct {
	transitions    *prometheus.CounterVec // by state entered
	deliveries     *prometheus.CounterVec // attempts by action type and outcome
	attemptSeconds prometheus.Histogram
	active         prometheus.Gauge
	evaluations    *prometheus.CounterVec // events evaluated, by path (memory, database)
}

func newMetrics(reg *prometheus.Registry, oldest func() float64) *metrics {
	m := &metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_event_transitions_total",
			Help: "Event state changes committed by this instance, by state entered (triggered, normal).",
		}, []string{"state"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_event_deliveries_total",
			Help: "Delivery attempts run by this instance, by action type and outcome (delivered, retry, failed).",
		}, []string{"action", "outcome"}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sensorapi_event_delivery_attempt_seconds", Help: "Duration of one delivery attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 11),
		}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sensorapi_event_watched_variables", Help: "Variables that have active events.",
		}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sensorapi_event_evaluations_total",
			Help: "Events evaluated over new values by this instance, by path: memory (the written rows, no database work unless a state changes) or database (stored state and values).",
		}, []string{"path"}),
	}
	reg.MustRegister(m.transitions, m.deliveries, m.attemptSeconds, m.active, m.evaluations,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sensorapi_event_oldest_pending_delivery_seconds",
			Help: "Age of the oldest delivery neither delivered nor failed (0: none), read at scrape.",
		}, oldest))
	return m
}
