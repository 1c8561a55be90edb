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
}

// FromEnv reads Config, applying the documented defaults.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:  os.Getenv("DATABASE_URL"),
		Addr:         getenv("SENSORAPI_ADDR", ":8080"),
		AdminToken:   os.Getenv("SENSORAPI_ADMIN_TOKEN"),
		PublicURL:    strings.TrimRight(os.Getenv("SENSORAPI_PUBLIC_URL"), "/"),
		MaxBodyBytes: 16 << 20,
		QueryTimeout: 30 * time.Second,
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
	if v := os.Getenv("SENSORAPI_QUERY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("SENSORAPI_QUERY_TIMEOUT: want a positive duration such as 30s, got %q", v)
		}
		c.QueryTimeout = d
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
	return c, nil
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
