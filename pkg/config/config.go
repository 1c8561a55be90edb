// Package config reads the service's settings from the environment (API.md §11).
package config

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is everything `sensorapi serve` can be told.
type Config struct {
	DatabaseURL  string        // DATABASE_URL; empty: start a TimescaleDB container
	Addr         string        // SENSORAPI_ADDR
	AdminToken   string        // SENSORAPI_ADMIN_TOKEN
	PublicURL    string        // SENSORAPI_PUBLIC_URL; empty: from each request
	LogLevel     slog.Level    // SENSORAPI_LOG_LEVEL
	MaxBodyBytes int64         // SENSORAPI_MAX_BODY_BYTES
	QueryTimeout time.Duration // SENSORAPI_QUERY_TIMEOUT
	RateLimit    float64       // SENSORAPI_RATE_LIMIT: requests/s per token; 0 = off
	RateBurst    int           // SENSORAPI_RATE_BURST

	Ingest Ingest
	// CacheTTL bounds how long a token, device or variable lookup is reused even when
	// no invalidation arrives (SENSORAPI_CACHE_TTL); CacheSize bounds each cache's
	// entries (SENSORAPI_CACHE_SIZE).
	CacheTTL  time.Duration
	CacheSize int

	MQTT MQTT

	// ReplicaURLs are streaming replicas of DatabaseURL for the value-scanning reads
	// (DATABASE_REPLICA_URL, comma-separated); ReplicaMaxLag is how long a read waits
	// for one to replay the primary's position (SENSORAPI_REPLICA_MAX_LAG).
	ReplicaURLs   []string
	ReplicaMaxLag time.Duration
}

// MQTT configures the embedded broker (API.md §12, docs/mqtt.md).
type MQTT struct {
	Addr    string // SENSORAPI_MQTT_ADDR; empty: no plain listener
	TLSAddr string // SENSORAPI_MQTT_TLS_ADDR, with TLSCert and TLSKey
	TLSCert string // SENSORAPI_MQTT_TLS_CERT: PEM file
	TLSKey  string // SENSORAPI_MQTT_TLS_KEY: PEM file
}

// Ingest tunes the ingestion pipeline (docs/operations.md, "Ingestion pipeline").
type Ingest struct {
	BatchDots  int           // SENSORAPI_INGEST_BATCH_DOTS
	QueueDots  int           // SENSORAPI_INGEST_QUEUE_DOTS
	QueueWait  time.Duration // SENSORAPI_INGEST_QUEUE_WAIT
	Committers int           // SENSORAPI_INGEST_COMMITTERS
}

// Defaults is the configuration with nothing set.
func Defaults() Config {
	return Config{
		Addr:          ":8080",
		MaxBodyBytes:  16 << 20,
		QueryTimeout:  30 * time.Second,
		Ingest:        Ingest{BatchDots: 2000, QueueDots: 100_000, QueueWait: 2 * time.Second, Committers: 2},
		CacheTTL:      30 * time.Second,
		CacheSize:     100_000,
		LogLevel:      slog.LevelInfo,
		MQTT:          MQTT{Addr: ":1883"},
		ReplicaMaxLag: time.Second,
	}
}

// FromEnv reads Config, applying the documented defaults.
func FromEnv() (Config, error) {
	c := Defaults()
	c.DatabaseURL = os.Getenv("DATABASE_URL")
	c.Addr = getenv("SENSORAPI_ADDR", c.Addr)
	c.AdminToken = os.Getenv("SENSORAPI_ADMIN_TOKEN")
	c.PublicURL = strings.TrimRight(os.Getenv("SENSORAPI_PUBLIC_URL"), "/")
	if v, ok := os.LookupEnv("SENSORAPI_MQTT_ADDR"); ok {
		c.MQTT.Addr = v // set but empty turns the plain listener off
	}
	for _, u := range strings.Split(os.Getenv("DATABASE_REPLICA_URL"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.ReplicaURLs = append(c.ReplicaURLs, u)
		}
	}
	c.MQTT.TLSAddr = os.Getenv("SENSORAPI_MQTT_TLS_ADDR")
	c.MQTT.TLSCert = os.Getenv("SENSORAPI_MQTT_TLS_CERT")
	c.MQTT.TLSKey = os.Getenv("SENSORAPI_MQTT_TLS_KEY")
	if c.MQTT.TLSAddr != "" && (c.MQTT.TLSCert == "" || c.MQTT.TLSKey == "") {
		return c, fmt.Errorf("SENSORAPI_MQTT_TLS_ADDR needs SENSORAPI_MQTT_TLS_CERT and SENSORAPI_MQTT_TLS_KEY")
	}
	if err := c.LogLevel.UnmarshalText([]byte(getenv("SENSORAPI_LOG_LEVEL", "info"))); err != nil {
		return c, fmt.Errorf("SENSORAPI_LOG_LEVEL: %w", err)
	}
	if v := os.Getenv("SENSORAPI_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("SENSORAPI_MAX_BODY_BYTES: want a positive integer, got %q", v)
		}
		c.MaxBodyBytes = n
	}
	if err := positiveDuration("SENSORAPI_QUERY_TIMEOUT", &c.QueryTimeout); err != nil {
		return c, err
	}
	if v := os.Getenv("SENSORAPI_RATE_LIMIT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return c, fmt.Errorf("SENSORAPI_RATE_LIMIT: want requests per second (0 = off), got %q", v)
		}
		c.RateLimit = f
	}
	c.RateBurst = max(1, int(c.RateLimit))
	if v := os.Getenv("SENSORAPI_RATE_BURST"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("SENSORAPI_RATE_BURST: want a positive integer, got %q", v)
		}
		c.RateBurst = n
	}
	return c, c.pipelineFromEnv()
}

// pipelineFromEnv reads the ingestion and cache knobs.
func (c *Config) pipelineFromEnv() error {
	for _, p := range []struct {
		name string
		dst  *int
	}{
		{"SENSORAPI_INGEST_BATCH_DOTS", &c.Ingest.BatchDots},
		{"SENSORAPI_INGEST_QUEUE_DOTS", &c.Ingest.QueueDots},
		{"SENSORAPI_INGEST_COMMITTERS", &c.Ingest.Committers},
		{"SENSORAPI_CACHE_SIZE", &c.CacheSize},
	} {
		if err := positiveInt(p.name, p.dst); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{
		{"SENSORAPI_INGEST_QUEUE_WAIT", &c.Ingest.QueueWait},
		{"SENSORAPI_CACHE_TTL", &c.CacheTTL},
		{"SENSORAPI_REPLICA_MAX_LAG", &c.ReplicaMaxLag},
	} {
		if err := positiveDuration(p.name, p.dst); err != nil {
			return err
		}
	}
	if c.Ingest.QueueDots < c.Ingest.BatchDots {
		return fmt.Errorf("SENSORAPI_INGEST_QUEUE_DOTS (%d) must be at least SENSORAPI_INGEST_BATCH_DOTS (%d)",
			c.Ingest.QueueDots, c.Ingest.BatchDots)
	}
	return nil
}

// positiveInt sets *dst from the variable when it is set.
func positiveInt(name string, dst *int) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s: want a positive integer, got %q", name, v)
	}
	*dst = n
	return nil
}

// positiveDuration sets *dst from the variable when it is set.
func positiveDuration(name string, dst *time.Duration) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%s: want a positive duration such as 2s, got %q", name, v)
	}
	*dst = d
	return nil
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
