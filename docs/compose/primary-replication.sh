#!/bin/bash
# Runs once, when the primary's data directory is initialised (docker-entrypoint-initdb.d):
# lets the replica of the "replica" profile connect for streaming replication.
set -e
echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
