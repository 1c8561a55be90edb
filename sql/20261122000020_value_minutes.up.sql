-- Per-minute rollups of "values": count, sum, min and max of each (variable, minute)
-- that holds at least one value. Analytics that only need those (statistics count,
-- sum and mean; resample and aggregation mean, min, max, count and sum) read one row a
-- minute for the whole minutes of their range and raw values only at its partial ends,
-- which at a few seconds between values is 10-20x fewer rows (docs/queries.md).
--
-- Kept exact by the write path in the same transaction as the values (pkg/ingest):
-- new values add to their minute, a replaced or deleted value makes its minute be
-- recomputed from "values". Apache TimescaleDB has no continuous aggregates, and
-- they would lag the data anyway, while these answers must see every acknowledged dot.
CREATE TABLE value_minutes (
    variable_id bigint NOT NULL,
    minute      timestamptz NOT NULL,
    n           integer NOT NULL,
    sum         double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL
);

--bun:split

-- Same chunk interval as "values", so drop_chunks with one older_than trims both alike.
SELECT create_hypertable('value_minutes', by_range('minute', INTERVAL '7 days'), create_default_indexes => false);

--bun:split

CREATE UNIQUE INDEX value_minutes_variable_minute_idx ON value_minutes (variable_id, minute);

--bun:split

-- Existing data (a database migrated from before this table).
INSERT INTO value_minutes (variable_id, minute, n, sum, min, max)
SELECT variable_id, time_bucket(INTERVAL '1 minute', ts), count(*), sum(value), min(value), max(value)
FROM "values"
GROUP BY 1, 2;
