-- Packed layout (issue 32, docs/operations.md "Storage per point"): the raw values of a
-- (variable, UTC day) older than the late-data window, moved out of "values" into one
-- row of arrays that PostgreSQL compresses with lz4 when it TOASTs them (a day at 10 s
-- is ~140 KB of arrays, ~15 KB compressed). Each dot's timestamp and created_at are
-- stored as the residual from a straight line through the day's first and last,
-- so that regular series store zeros and a reader rebuilds every timestamp with one
-- multiplication, without a running sum:
--   ts(i)         = ts_base + ((i − 1) · ts_step + ts_r[i]) ms
--   created_at(i) = created_base + ((i − 1) · created_step + created_r[i]) ms
-- (i is the dot's 1-based position, timestamps ascending). Contexts are rare: a JSON
-- object from position to context, NULL when the day has none.
--
-- A (variable, day) is in exactly one layout: rows of "values" (and its minute tiles
-- in value_minutes) or one row here (and no minute tiles: readers roll packed dots up
-- themselves). pkg/storage packs; the write path unpacks a day before it writes into it.
CREATE TABLE values_packed (
    variable_id  bigint NOT NULL,
    day          timestamptz NOT NULL,
    n            integer NOT NULL,
    ts_base      timestamptz NOT NULL,
    ts_step      bigint NOT NULL,
    ts_r         integer[] NOT NULL,
    value        double precision[] NOT NULL,
    created_base timestamptz NOT NULL,
    created_step bigint NOT NULL,
    created_r    bigint[] NOT NULL,
    context      jsonb
);

--bun:split

ALTER TABLE values_packed
    ALTER COLUMN ts_r SET COMPRESSION lz4, ALTER COLUMN value SET COMPRESSION lz4,
    ALTER COLUMN created_r SET COMPRESSION lz4, ALTER COLUMN context SET COMPRESSION lz4;

--bun:split

-- The chunks of "values" (7 days): retention's drop_chunks trims both layouts alike.
SELECT create_hypertable('values_packed', by_range('day', INTERVAL '7 days'), create_default_indexes => false);

--bun:split

CREATE UNIQUE INDEX values_packed_variable_day_idx ON values_packed (variable_id, day);

--bun:split

-- The packed dots of the variables with a timestamp in [first, last], as rows. A SQL
-- function PostgreSQL inlines into the calling statement: the day bounds become an
-- index range scan with constant bounds (chunk exclusion at plan time), and the
-- unnest runs only for the days the range touches (none when last < first: a
-- compiled statement's empty spans cost no read).
CREATE FUNCTION packed_values(variables bigint[], first timestamptz, last timestamptz)
RETURNS TABLE (variable_id bigint, ts timestamptz, value double precision, context jsonb, created_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.variable_id, d.ts, d.value, p.context -> d.i::text,
           p.created_base + ((d.i - 1) * p.created_step + p.created_r[d.i]) * INTERVAL '1 ms'
    FROM values_packed p
    CROSS JOIN LATERAL (
        SELECT p.ts_base + ((u.i - 1) * p.ts_step + u.r) * INTERVAL '1 ms' AS ts, u.value, u.i
        FROM unnest(p.ts_r, p.value) WITH ORDINALITY AS u(r, value, i)
    ) d
    WHERE first <= last AND p.variable_id = ANY(variables)
      AND p.day >= time_bucket(INTERVAL '1 day', first) AND p.day <= last
      AND d.ts >= first AND d.ts <= last
$$;

--bun:split

-- The first day to unpack for the k newest packed dots of a variable up to last: the
-- newest packed days that hold k dots, and one more, since last may cut the newest
-- (NULL: no packed day up to last). Newest-first reads (values pages, the last 100
-- dots of a resample without range) unpack only those days.
CREATE FUNCTION packed_newest_day(variable bigint, k bigint, last timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT min(day) FROM (
        SELECT day, coalesce(sum(n) OVER (ORDER BY day DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS newer
        FROM values_packed WHERE variable_id = variable AND day <= last
    ) d WHERE newer < k
$$;
