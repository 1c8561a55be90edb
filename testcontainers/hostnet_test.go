package testcontainers

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
	"testing"
)

// TestHostNetwork: a container of no Docker network runs on the host's network,
// listening on 127.0.0.1 at its DSN's port with nothing published, and psql run inside
// it (the CSV bench's floor) reaches the same server without naming a port.
func TestHostNetwork(t *testing.T) {
	ctx := context.Background()
	tsdb, db := startOwn(t, Options{Fast: true})
	u, err := url.Parse(tsdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	mode, err := exec.CommandContext(ctx, "docker", "container", "inspect", "-f",
		"{{.HostConfig.NetworkMode}} {{len .NetworkSettings.Ports}}", tsdb.container.GetContainerID()).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(mode)); got != "host 0" {
		t.Fatalf("network mode and published ports: %q, want host and none", got)
	}
	var listen string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('listen_addresses')").Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if listen != "127.0.0.1" {
		t.Fatalf("listen_addresses %q, want 127.0.0.1 only", listen)
	}
	out, err := tsdb.Exec(ctx, `PGPASSWORD=postgres psql -U postgres -d postgres -X -Atc "SELECT current_setting('port')"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != u.Port() {
		t.Fatalf("psql in the container reached port %q, the DSN names %q", got, u.Port())
	}
}
