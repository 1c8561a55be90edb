package config

import "testing"

// TestParseSize: sizes in bytes with units of powers of 1024, as Prometheus reads
// --storage.tsdb.retention.size; anything else is refused.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, "512B": 512, "1KB": 1 << 10, "500MB": 500 << 20, "40GB": 40 << 30, "40GiB": 40 << 30,
		"2tb": 2 << 40, " 3 MiB ": 3 << 20,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1GB", "1.5GB", "GB", "1PB", "9999999999TB"} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, n)
		}
	}
}
