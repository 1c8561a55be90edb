CREATE EXTENSION IF NOT EXISTS timescaledb;

--bun:split

-- One row per (variable, timestamp): the unique index makes an upsert "last write
-- wins", so a retried request never duplicates data. variable_id is the internal
-- bigint key of variables (no foreign key: hypertable rows are removed explicitly when
-- a variable goes, in the same transaction).
CREATE TABLE "values" (
    variable_id bigint NOT NULL,
    ts          timestamptz NOT NULL,
    value       double precision NOT NULL,
    context     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- Chunk interval: 7 days. Range queries of one variable over a year (the statistics and
-- resample workloads) then touch ~52 chunks, keeping planning cheap, while a week of
-- rows at a few thousand dots/s (~100 bytes a row with its index) still fits the
-- "recent chunk in 25% of memory" rule on a 16 GiB database host. Ingest-heavy
-- deployments can shorten it with set_chunk_time_interval (docs/operations.md).
-- No default (ts DESC) index: every read names a variable, so the unique index below
-- serves them all, and one index less makes ingestion cheaper.
SELECT create_hypertable('values', by_range('ts', INTERVAL '7 days'), create_default_indexes => false);

--bun:split

-- Serves upserts and every read: variable_id = ? AND ts BETWEEN ? AND ?, newest first.
CREATE UNIQUE INDEX values_variable_ts_idx ON "values" (variable_id, ts DESC);
