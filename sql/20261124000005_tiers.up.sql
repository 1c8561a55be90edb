-- Rollup tiers (issue 17): the minute rollups gain what first, last and the timestamps
-- of min and max need, and two coarser tiers join them: 15-minute tiles (quarters) and
-- UTC days. Every tier has the same columns, per variable and tile holding a value:
--   tile                 the start of the tile (UTC-aligned to its width)
--   n, sum, min, max     count, sum and extremes of the tile's values
--   ks, m2               the spread: Σ(v − min) and Σ(v − mean)², merged by Chan et al.'s
--                        formula (NULL when a value lies beyond ±1e150)
--   first_ts/first_value, last_ts/last_value   the tile's first and last dot
--   min_ts, max_ts       the earliest timestamps holding min and max
-- The write path keeps every tier exact in the same transaction as the values
-- (pkg/ingest/tiers.go); the compiler reads the coarsest tiles that fit a request and
-- the finer tiers and raw values at its edges (docs/queries.md, "Rollup tiers").
ALTER TABLE value_minutes RENAME COLUMN minute TO tile;

--bun:split

ALTER INDEX value_minutes_variable_minute_idx RENAME TO value_minutes_variable_tile_idx;

--bun:split

ALTER TABLE value_minutes
    ADD COLUMN first_ts timestamptz, ADD COLUMN first_value double precision,
    ADD COLUMN last_ts timestamptz, ADD COLUMN last_value double precision,
    ADD COLUMN min_ts timestamptz, ADD COLUMN max_ts timestamptz;

--bun:split

UPDATE value_minutes m
SET first_ts = s.first_ts, first_value = s.first_value, last_ts = s.last_ts, last_value = s.last_value,
    min_ts = s.min_ts, max_ts = s.max_ts
FROM (
    SELECT variable_id, time_bucket(INTERVAL '1 minute', ts) AS tile,
           min(ts) AS first_ts, first(value, ts) AS first_value, max(ts) AS last_ts, last(value, ts) AS last_value,
           first(ts, ROW(value, ts)) AS min_ts, first(ts, ROW(-value, ts)) AS max_ts
    FROM "values"
    GROUP BY 1, 2
) s
WHERE m.variable_id = s.variable_id AND m.tile = s.tile;

--bun:split

ALTER TABLE value_minutes
    ALTER COLUMN first_ts SET NOT NULL, ALTER COLUMN first_value SET NOT NULL,
    ALTER COLUMN last_ts SET NOT NULL, ALTER COLUMN last_value SET NOT NULL,
    ALTER COLUMN min_ts SET NOT NULL, ALTER COLUMN max_ts SET NOT NULL;

--bun:split

CREATE TABLE value_quarters (
    variable_id bigint NOT NULL,
    tile        timestamptz NOT NULL,
    n           integer NOT NULL,
    sum         double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL,
    ks          double precision,
    m2          double precision,
    first_ts    timestamptz NOT NULL,
    first_value double precision NOT NULL,
    last_ts     timestamptz NOT NULL,
    last_value  double precision NOT NULL,
    min_ts      timestamptz NOT NULL,
    max_ts      timestamptz NOT NULL
);

--bun:split

-- 4 weeks of quarters a chunk: a year of one variable is 13 chunks of 35,040 rows.
SELECT create_hypertable('value_quarters', by_range('tile', INTERVAL '28 days'), create_default_indexes => false);

--bun:split

CREATE UNIQUE INDEX value_quarters_variable_tile_idx ON value_quarters (variable_id, tile);

--bun:split

CREATE TABLE value_days (
    variable_id bigint NOT NULL,
    tile        timestamptz NOT NULL,
    n           integer NOT NULL,
    sum         double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL,
    ks          double precision,
    m2          double precision,
    first_ts    timestamptz NOT NULL,
    first_value double precision NOT NULL,
    last_ts     timestamptz NOT NULL,
    last_value  double precision NOT NULL,
    min_ts      timestamptz NOT NULL,
    max_ts      timestamptz NOT NULL
);

--bun:split

-- 52 weeks of days a chunk: a decade of one variable is 11 chunks.
SELECT create_hypertable('value_days', by_range('tile', INTERVAL '364 days'), create_default_indexes => false);

--bun:split

CREATE UNIQUE INDEX value_days_variable_tile_idx ON value_days (variable_id, tile);

--bun:split

-- Existing data: quarters from the minutes, days from the quarters, merged as the write
-- path merges them (pkg/ingest/tiers.go, mergeTileSQL). A frozen copy, not a call: this
-- runs against the schema of its date, which mergeTileSQL does not follow (a tier column
-- added later is not there yet). `sensorapi rollups check` compares these tiles with the
-- values; `sensorapi rollups rebuild` recomputes them through mergeTileSQL.
INSERT INTO value_quarters (variable_id, tile, n, sum, min, max, ks, m2, first_ts, first_value, last_ts, last_value, min_ts, max_ts)
SELECT variable_id, parent, sum(n)::int, sum(sum), min(min), max(max),
       CASE WHEN count(*) = count(ks) THEN sum(n * a) END,
       CASE WHEN count(*) = count(ks) THEN sum(m2) + sum(n * power(a - abar, 2)) END,
       min(first_ts), first(first_value, first_ts), max(last_ts), last(last_value, last_ts),
       first(min_ts, ROW(min, min_ts)), first(max_ts, ROW(-max, max_ts))
FROM (SELECT y.*, sum(y.n * y.a) OVER w / sum(y.n) OVER w AS abar
      FROM (SELECT c.*, time_bucket(INTERVAL '900 seconds', c.tile) AS parent,
                   (c.min - min(c.min) OVER (PARTITION BY c.variable_id, time_bucket(INTERVAL '900 seconds', c.tile))) + c.ks / c.n AS a
            FROM value_minutes c) y
      WINDOW w AS (PARTITION BY y.variable_id, y.parent)) z
GROUP BY variable_id, parent;

--bun:split

INSERT INTO value_days (variable_id, tile, n, sum, min, max, ks, m2, first_ts, first_value, last_ts, last_value, min_ts, max_ts)
SELECT variable_id, parent, sum(n)::int, sum(sum), min(min), max(max),
       CASE WHEN count(*) = count(ks) THEN sum(n * a) END,
       CASE WHEN count(*) = count(ks) THEN sum(m2) + sum(n * power(a - abar, 2)) END,
       min(first_ts), first(first_value, first_ts), max(last_ts), last(last_value, last_ts),
       first(min_ts, ROW(min, min_ts)), first(max_ts, ROW(-max, max_ts))
FROM (SELECT y.*, sum(y.n * y.a) OVER w / sum(y.n) OVER w AS abar
      FROM (SELECT c.*, time_bucket(INTERVAL '86400 seconds', c.tile) AS parent,
                   (c.min - min(c.min) OVER (PARTITION BY c.variable_id, time_bucket(INTERVAL '86400 seconds', c.tile))) + c.ks / c.n AS a
            FROM value_quarters c) y
      WINDOW w AS (PARTITION BY y.variable_id, y.parent)) z
GROUP BY variable_id, parent;
