-- Retention (API.md §16, pkg/retention). The job drops whole chunks of "values" older
-- than SENSORAPI_RETENTION_RAW (and of the rollup tiers older than
-- SENSORAPI_RETENTION_ROLLUPS) and records here, in the same transaction, what every
-- instance needs to know about it:
--   raw_horizon:  the oldest timestamp still held raw: the end of the newest chunk of
--                 "values" ever dropped (NULL: nothing dropped yet). It only moves
--                 forward. Reads answer from the tiers before it; writes before it are
--                 refused (pkg/ingest).
--   rows_removed: raw rows removed by every run so far;
--   ran_at:       when a run last held the lock (whether or not it dropped anything).
-- One row, always present: readers need no "if exists".
CREATE TABLE retention_state (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    raw_horizon  timestamptz,
    rows_removed bigint NOT NULL DEFAULT 0,
    ran_at       timestamptz
);

--bun:split

INSERT INTO retention_state DEFAULT VALUES;
