package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReplicaURLs: DATABASE_REPLICA_URL lists URLs separated by commas, and a URL may
// name several hosts, separated by commas too.
func TestReplicaURLs(t *testing.T) {
	const multi = "postgres://u:p@db1:5432,db2:5432/sensors?target_session_attrs=standby"
	for in, want := range map[string][]string{
		"": nil,
		"postgres://u:p@r1/s, postgresql://u:p@r2/s": {"postgres://u:p@r1/s", "postgresql://u:p@r2/s"},
		multi:                          {multi},
		multi + ",postgres://u:p@r3/s": {multi, "postgres://u:p@r3/s"},
		"postgres://u:p@r1/s,":         {"postgres://u:p@r1/s"},
	} {
		t.Setenv("DATABASE_REPLICA_URL", in)
		cfg, err := FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.ReplicaURLs, want) {
			t.Errorf("DATABASE_REPLICA_URL=%q: %q, want %q", in, cfg.ReplicaURLs, want)
		}
	}
}

func TestParseRetention(t *testing.T) {
	const d = 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"90d": 90 * d, "36h": 36 * time.Hour, "2w": 14 * d, "1w3d": 10 * d, "30m": 30 * time.Minute, "45s": 45 * time.Second,
	} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "d", "90", "90x", "-1d", "1.5d", "90 d", "99999999999999w"} {
		if got, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %v, want an error", in, got)
		}
	}
}

// TestRetentionFromEnv: invalid values are a startup error naming the variable; the
// rollups may not go before the raw values.
func TestRetentionFromEnv(t *testing.T) {
	for _, c := range []struct{ raw, rollups, err string }{
		{"", "", ""},
		{"90d", "", ""},
		{"90d", "2w", "SENSORAPI_RETENTION_ROLLUPS"},
		{"90d", "400d", ""},
		{"", "400d", "SENSORAPI_RETENTION_ROLLUPS"},
		{"ninety", "", "SENSORAPI_RETENTION_RAW"},
		{"90d", "1y", "SENSORAPI_RETENTION_ROLLUPS"},
	} {
		t.Setenv("SENSORAPI_RETENTION_RAW", c.raw)
		t.Setenv("SENSORAPI_RETENTION_ROLLUPS", c.rollups)
		cfg, err := FromEnv()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q %q: %v", c.raw, c.rollups, err)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%q %q: error %v, want one naming %s", c.raw, c.rollups, err, c.err)
		case c.err == "" && c.raw == "90d" && cfg.Retention.Raw != 90*24*time.Hour:
			t.Errorf("%q: Raw = %v", c.raw, cfg.Retention.Raw)
		}
	}
}
