// Command sensorapi is the sensor data service and its tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `sensorapi - a sensor data service on TimescaleDB

Usage:
  sensorapi serve                          run the HTTP API (DATABASE_URL, or a TimescaleDB container)
  sensorapi migrate                        apply schema migrations to DATABASE_URL
  sensorapi account create NAME            create an account; prints its token
  sensorapi token create|list|revoke       account, read-only and device tokens (see token --help)
  sensorapi load [flags]                   write a reproducible data set (see load --help)
  sensorapi import [flags] FILE            upload a CSV or NDJSON history file to a server (see import --help)
  sensorapi compile --endpoint E < req.json  print the SQL an analytics request runs
  sensorapi compile --synthetic 'EXPR'     print the SQL that computes a synthetic variable (API.md §17)
  sensorapi synthetic check                compare every synthetic variable with a recomputation (exit 1 if one differs)
  sensorapi rollups rebuild|check         recompute the minute rollups from the values, or compare them
  sensorapi retention run                  drop raw and rollup chunks past their retention, now (see retention --help)
  sensorapi storage report|pack            bytes per stored point per table; pack old days now (see storage --help)
  sensorapi sql-role create|list|drop      read-only SQL login roles per account, schema sensor (see sql-role --help)
  sensorapi healthcheck                    exit 0 when the local server answers /healthz (container health checks)
  sensorapi help                           this text

Every subcommand takes --help. Configuration is read from the environment:
  DATABASE_URL, SENSORAPI_ADDR (:8080), SENSORAPI_ADMIN_TOKEN, SENSORAPI_PUBLIC_URL,
  SENSORAPI_LOG_LEVEL (info), SENSORAPI_MAX_BODY_BYTES (16777216), SENSORAPI_QUERY_TIMEOUT (30s),
  SENSORAPI_IMPORT_MAX_BYTES (1GiB),
  SENSORAPI_MQTT_ADDR (:1883), SENSORAPI_MQTT_TLS_ADDR/_CERT/_KEY, DATABASE_REPLICA_URL,
  SENSORAPI_REPLICA_MAX_LAG (1s), SENSORAPI_RETENTION_RAW and SENSORAPI_RETENTION_ROLLUPS
  (90d, 36h, 2w; default: keep forever), SENSORAPI_INGEST_* and SENSORAPI_CACHE_* (docs/operations.md)

Examples:
  make run
  DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres sensorapi serve
  TOKEN=$(sensorapi account create acme)
`

type command func(ctx context.Context, args []string) error

var commands = map[string]command{
	"serve":       serveCmd,
	"migrate":     migrateCmd,
	"account":     accountCmd,
	"token":       tokenCmd,
	"load":        loadCmd,
	"import":      importCmd,
	"compile":     compileCmd,
	"rollups":     rollupsCmd,
	"retention":   retentionCmd,
	"synthetic":   syntheticCmd,
	"healthcheck": healthcheckCmd,
	"storage":     storageCmd,
	"sql-role":    sqlRoleCmd,
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "--help" || os.Args[1] == "-h" {
		fmt.Print(usage)
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "sensorapi: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := cmd(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) { // --help printed the subcommand's usage
			return
		}
		fmt.Fprintln(os.Stderr, "sensorapi:", err)
		os.Exit(1)
	}
}
