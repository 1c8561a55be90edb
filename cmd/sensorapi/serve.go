package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/server"
)

func serveCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi serve

Runs the HTTP API and the MQTT broker (SENSORAPI_MQTT_ADDR, default :1883; empty
turns it off). Migrations are applied on start. With SENSORAPI_RETENTION_RAW or
SENSORAPI_RETENTION_ROLLUPS set it applies the retention at start and hourly (one
instance at a time; see sensorapi retention --help).

DATABASE_URL is required, except in the development build of make run (-tags dev):
there, without it, serve starts a TimescaleDB container whose data lives in the Docker
volume SENSORAPI_DATA_VOLUME (default sensorapi-data), so it survives restarts: the
container (of the same name) is stopped on exit and started again next time. It prints
the admin token, kept in $XDG_CONFIG_HOME/sensorapi/admin-token (~/.config/...) so that
the same one is printed each time. make reset deletes all three.

Example:
  SENSORAPI_ADDR=:9090 DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres sensorapi serve
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	tuneGC()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	local := cfg.DatabaseURL == ""
	if local {
		stop, err := startLocalDatabase(ctx, &cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return server.Serve(ctx, cfg, log, func(tok string) {
		switch {
		case local:
			printToken(cfg.AdminToken, "admin token", cfg.Addr)
		case tok != "":
			printToken(tok, "admin token (shown once)", cfg.Addr)
		}
	})
}

// tuneGC trades memory for CPU unless GOGC or GOMEMLIMIT are set: the write path
// allocates per message, and with Go's default (GOGC=100) garbage collection took 15%
// of the server's CPU under make bench-fleet with a live heap of ~20 MiB. A larger
// GOGC collects less often; the memory limit makes it collect sooner when the heap
// nears it (docs/operations.md, "Tuning").
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(192 << 20)
	}
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i:]
		}
	}
	return ":8080"
}

// printToken shows the admin token, a curl to try and the console's URL, which logs in
// through its fragment (a fragment never reaches the server).
func printToken(tok, what, addr string) {
	base := "http://127.0.0.1" + portOf(addr)
	fmt.Fprintf(os.Stderr, "\n%s: %s\ntry:     curl -H 'X-Auth-Token: %s' %s/api/v2.0/devices/\nconsole: %s/console/#token=%s\n\n",
		what, tok, tok, base, base, tok)
}
