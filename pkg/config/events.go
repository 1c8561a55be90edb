package config

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Events tunes events and their deliveries (API.md §18, docs/events.md). Zero fields
// take the defaults of WithDefaults.
type Events struct {
	// WebhookAllowPrivate lets webhooks target private, loopback and link-local
	// addresses (SENSORAPI_WEBHOOK_ALLOW_PRIVATE=true): tests and on-premises use.
	WebhookAllowPrivate bool
	RetryBase           time.Duration // SENSORAPI_EVENTS_RETRY_BASE: first retry delay, doubled per attempt (1s)
	RetryMax            time.Duration // SENSORAPI_EVENTS_RETRY_MAX: longest delay between attempts (1h)
	GiveUp              time.Duration // SENSORAPI_EVENTS_GIVE_UP: no attempt after this age (24h)
	Timeout             time.Duration // SENSORAPI_WEBHOOK_TIMEOUT: one webhook attempt (10s)
	Workers             int           // SENSORAPI_EVENTS_WORKERS: deliveries running at once per instance (20)
	Evaluators          int           // SENSORAPI_EVENTS_EVALUATORS: events evaluated at once per instance (2)
	Sweep               time.Duration // SENSORAPI_EVENTS_SWEEP: catch-up of missed evaluations (1s)
	Poll                time.Duration // SENSORAPI_EVENTS_POLL: deliveries' queue poll (100ms)
}

// WithDefaults fills the zero fields.
func (e Events) WithDefaults() Events {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&e.RetryBase, time.Second)
	def(&e.RetryMax, time.Hour)
	def(&e.GiveUp, 24*time.Hour)
	def(&e.Timeout, 10*time.Second)
	def(&e.Sweep, time.Second)
	def(&e.Poll, 100*time.Millisecond)
	if e.Workers <= 0 {
		e.Workers = 20
	}
	if e.Evaluators <= 0 {
		e.Evaluators = 2
	}
	return e
}

// eventsFromEnv reads the SENSORAPI_EVENTS_* and SENSORAPI_WEBHOOK_* settings.
func (c *Config) eventsFromEnv() error {
	if v := os.Getenv("SENSORAPI_WEBHOOK_ALLOW_PRIVATE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SENSORAPI_WEBHOOK_ALLOW_PRIVATE: want true or false, got %q", v)
		}
		c.Events.WebhookAllowPrivate = b
	}
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{
		{"SENSORAPI_EVENTS_RETRY_BASE", &c.Events.RetryBase},
		{"SENSORAPI_EVENTS_RETRY_MAX", &c.Events.RetryMax},
		{"SENSORAPI_EVENTS_GIVE_UP", &c.Events.GiveUp},
		{"SENSORAPI_WEBHOOK_TIMEOUT", &c.Events.Timeout},
		{"SENSORAPI_EVENTS_SWEEP", &c.Events.Sweep},
		{"SENSORAPI_EVENTS_POLL", &c.Events.Poll},
	} {
		if err := positiveDuration(p.name, p.dst); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"SENSORAPI_EVENTS_WORKERS", &c.Events.Workers}, {"SENSORAPI_EVENTS_EVALUATORS", &c.Events.Evaluators}} {
		if err := positiveInt(p.name, p.dst); err != nil {
			return err
		}
	}
	return nil
}
