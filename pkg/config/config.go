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
	DatabaseURL  string     // DATABASE_URL; empty: start a TimescaleDB container
	Addr         string     // SENSORAPI_ADDR
	PprofAddr    string     // SENSORAPI_PPROF_ADDR: Go's profiler, off when empty
	DataVolume   string     // SENSORAPI_DATA_VOLUME: make run's database volume and container
	AdminToken   string     // SENSORAPI_ADMIN_TOKEN
	PublicURL    string     // SENSORAPI_PUBLIC_URL; empty: from each request
	LogLevel     slog.Level // SENSORAPI_LOG_LEVEL
	MaxBodyBytes int64      // SENSORAPI_MAX_BODY_BYTES
	// ImportMaxBytes (SENSORAPI_IMPORT_MAX_BYTES, a size such as 1GiB) bounds a history
	// import's body, as sent and, when gzipped, decompressed (API.md §21).
	ImportMaxBytes int64
	QueryTimeout   time.Duration // SENSORAPI_QUERY_TIMEOUT
	RateLimit      float64       // SENSORAPI_RATE_LIMIT: requests/s per token; 0 = off
	RateBurst      int           // SENSORAPI_RATE_BURST

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

	Retention Retention
	// WriteStopSize (SENSORAPI_WRITE_STOP_SIZE, bytes; 0: none): past it writes are
	// refused with 507 while reads, deletes and retention go on (pkg/budget).
	WriteStopSize int64

	// PackAfter (SENSORAPI_PACK_AFTER, a duration such as 2d; "off": 0) is the
	// late-data window: `serve` packs the raw values of every day older than it
	// (pkg/values, docs/operations.md "Storage per point"). At least 1d.
	PackAfter time.Duration

	Events Events // events and webhook deliveries (events.go)
}

// Retention is how long data is kept (API.md §16, docs/operations.md "Retention");
// zero keeps it forever.
type Retention struct {
	Raw     time.Duration // SENSORAPI_RETENTION_RAW: raw values ("values")
	Rollups time.Duration // SENSORAPI_RETENTION_ROLLUPS: the rollup tiers
	// Size (SENSORAPI_RETENTION_SIZE, bytes; 0: none): past it the oldest raw chunks
	// are dropped, the tiers kept (pkg/budget).
	Size int64
}

// Enabled tells whether anything is ever removed.
func (r Retention) Enabled() bool { return r.Raw > 0 || r.Rollups > 0 }

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
		Addr:           ":8080",
		DataVolume:     "sensorapi-data",
		MaxBodyBytes:   16 << 20,
		ImportMaxBytes: 1 << 30,
		QueryTimeout:   30 * time.Second,
		Ingest:         Ingest{BatchDots: 2000, QueueDots: 100_000, QueueWait: 2 * time.Second, Committers: 2},
		CacheTTL:       30 * time.Second,
		CacheSize:      100_000,
		LogLevel:       slog.LevelInfo,
		MQTT:           MQTT{Addr: ":1883"},
		ReplicaMaxLag:  time.Second,
	}
}

// FromEnv reads Config, applying the documented defaults.
func FromEnv() (Config, error) {
	c := Defaults()
	c.DatabaseURL = os.Getenv("DATABASE_URL")
	c.Addr = getenv("SENSORAPI_ADDR", c.Addr)
	c.AdminToken = os.Getenv("SENSORAPI_ADMIN_TOKEN")
	c.PprofAddr = os.Getenv("SENSORAPI_PPROF_ADDR")
	if err := c.packAfterFromEnv(); err != nil {
		return c, err
	}
	c.DataVolume = getenv("SENSORAPI_DATA_VOLUME", c.DataVolume)
	c.PublicURL = strings.TrimRight(os.Getenv("SENSORAPI_PUBLIC_URL"), "/")
	if v, ok := os.LookupEnv("SENSORAPI_MQTT_ADDR"); ok {
		c.MQTT.Addr = v // set but empty turns the plain listener off
	}
	c.ReplicaURLs = splitURLs(os.Getenv("DATABASE_REPLICA_URL"))
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
	if err := c.retentionFromEnv(); err != nil {
		return c, err
	}
	if err := c.eventsFromEnv(); err != nil {
		return c, err
	}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"SENSORAPI_WRITE_STOP_SIZE", &c.WriteStopSize}, {"SENSORAPI_RETENTION_SIZE", &c.Retention.Size},
		{"SENSORAPI_IMPORT_MAX_BYTES", &c.ImportMaxBytes}} {
		if v := strings.TrimSpace(os.Getenv(p.name)); v != "" {
			n, err := ParseSize(v)
			if err != nil {
				return c, fmt.Errorf("%s: %w", p.name, err)
			}
			*p.dst = n
		}
	}
	return c, c.pipelineFromEnv()
}

// retentionFromEnv reads SENSORAPI_RETENTION_RAW and SENSORAPI_RETENTION_ROLLUPS.
// The rollups are read wherever raw values exist (the minutes of a range's middle,
// API.md §16), so they may not go before the raw values do: a rollup retention needs
// a raw retention no longer than itself.
func (c *Config) retentionFromEnv() error {
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{
		{"SENSORAPI_RETENTION_RAW", &c.Retention.Raw},
		{"SENSORAPI_RETENTION_ROLLUPS", &c.Retention.Rollups},
	} {
		v := strings.TrimSpace(os.Getenv(p.name))
		if v == "" {
			continue
		}
		d, err := ParseRetention(v)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		*p.dst = d
	}
	if r := c.Retention; r.Rollups > 0 && (r.Raw == 0 || r.Raw > r.Rollups) {
		return fmt.Errorf("SENSORAPI_RETENTION_ROLLUPS (%s) must be at least SENSORAPI_RETENTION_RAW (%s): "+
			"the rollups summarize the raw values and are read wherever those exist",
			os.Getenv("SENSORAPI_RETENTION_ROLLUPS"), orForever(os.Getenv("SENSORAPI_RETENTION_RAW")))
	}
	return nil
}

func orForever(v string) string {
	if v == "" {
		return "forever"
	}
	return v
}

// DefaultPackAfter is the late-data window when SENSORAPI_PACK_AFTER is not set.
const DefaultPackAfter = 48 * time.Hour

// packAfterFromEnv reads SENSORAPI_PACK_AFTER: a window of at least a day (writers
// look for packed days only among dots older than a day), or off.
func (c *Config) packAfterFromEnv() error {
	v := strings.TrimSpace(os.Getenv("SENSORAPI_PACK_AFTER"))
	switch v {
	case "":
		c.PackAfter = DefaultPackAfter
		return nil
	case "off":
		c.PackAfter = 0
		return nil
	}
	d, err := ParseRetention(v)
	if err == nil && d < 24*time.Hour {
		err = fmt.Errorf("want at least 1d (writers look for packed days only among values older than a day), got %q", v)
	}
	if err != nil {
		return fmt.Errorf("SENSORAPI_PACK_AFTER: %w", err)
	}
	c.PackAfter = d
	return nil
}

// retentionUnits are the units of ParseRetention.
var retentionUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
}

// FormatRetention spells a retention the way ParseRetention reads it (2w, 90d, 36h).
func FormatRetention(d time.Duration) string {
	for _, u := range []struct {
		unit string
		d    time.Duration
	}{{"w", retentionUnits['w']}, {"d", retentionUnits['d']}, {"h", time.Hour}, {"m", time.Minute}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.unit
		}
	}
	return d.String()
}

// ParseRetention reads a retention duration: one or more integers each followed by a
// unit s, m, h, d (24 h) or w (7 d), such as 90d, 36h, 2w or 1w3d. It must be positive.
func ParseRetention(v string) (time.Duration, error) {
	bad := fmt.Errorf("want a duration such as 90d, 36h or 2w (units s, m, h, d, w), got %q", v)
	var total time.Duration
	for rest := v; rest != ""; {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, bad
		}
		unit, ok := retentionUnits[rest[i]]
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if !ok || err != nil || n > int64(1<<62)/int64(unit) {
			return 0, bad
		}
		if total += time.Duration(n) * unit; total < 0 {
			return 0, bad
		}
		rest = rest[i+1:]
	}
	if total <= 0 {
		return 0, bad
	}
	return total, nil
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

// sizeUnits are the units of ParseSize, powers of 1024 as Prometheus'
// --storage.tsdb.retention.size reads them (KB = KiB).
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1},
}

// ParseSize reads a positive size in bytes: an integer, optionally followed by B, KB,
// MB, GB or TB (or KiB … TiB, the same: powers of 1024), e.g. 500MB or 40GiB.
func ParseSize(v string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, s := range sizeUnits {
		if strings.HasSuffix(u, s.suffix) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, s.suffix)), s.bytes
			break
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a positive size such as 500MB or 40GB, got %q", v)
	}
	return n * mult, nil
}

// splitURLs splits DATABASE_REPLICA_URL at its commas, except those inside a URL that
// names several hosts (postgres://u:p@db1:5432,db2:5432/sensors, API.md §19): a new
// URL starts only where a scheme does.
func splitURLs(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
		case len(out) == 0 || strings.HasPrefix(part, "postgres://") || strings.HasPrefix(part, "postgresql://"):
			out = append(out, part)
		default:
			out[len(out)-1] += "," + part
		}
	}
	return out
}
