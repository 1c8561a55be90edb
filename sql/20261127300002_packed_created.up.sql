-- packed_rows: the packed dots of some variables as the rows they were, created_at
-- included, for the readers that need it (issue 32). packed_dots takes each dot's
-- created_at by subscripting the day's created_r array, which PostgreSQL detoasts (lz4)
-- again for every dot: reading a whole packed day with created_at cost ~190 ms of CPU,
-- quadratic in the dots per day. Here the array is sliced and unnested beside ts_r and
-- value, decompressed once per packed row. packed_dots and packed_values keep the
-- subscript: readers of values alone (every analytics statement, an operator's query
-- in psql) never ask for created_at, PostgreSQL drops the unused column, and unnesting
-- a third array would cost them ~14%. Callers: values pages and lv (pkg/ingest
-- read.go), unpacking a day (packed.go), synthetic variables' last values.
CREATE FUNCTION packed_rows(variables bigint[], first timestamptz, last timestamptz)
RETURNS TABLE (variable_id bigint, ts timestamptz, value double precision, context jsonb, created_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.variable_id, d.ts, d.value, p.context -> d.i::text,
           p.created_base + ((d.i - 1) * p.created_step + d.c) * INTERVAL '1 ms'
    FROM values_packed p
    CROSS JOIN LATERAL unnest(
        ARRAY[CASE WHEN p.ts_step > 0 AND p.ts_rmax IS NOT NULL
              THEN greatest(1, least(p.n + 1,
                   floor(((date_part('epoch', first) - date_part('epoch', p.ts_base)) * 1000 - p.ts_rmax) / p.ts_step)))::int
              ELSE 1 END],
        ARRAY[CASE WHEN p.ts_step > 0 AND p.ts_rmin IS NOT NULL
              THEN greatest(0, least(p.n,
                   floor(((date_part('epoch', last) - date_part('epoch', p.ts_base)) * 1000 - p.ts_rmin) / p.ts_step) + 2))::int
              ELSE p.n END],
        ARRAY[CASE WHEN p.ts_step > 0 AND p.ts_rmin IS NOT NULL
              THEN greatest(1, least(p.n + 1,
                   floor(((date_part('epoch', first) - date_part('epoch', p.ts_base)) * 1000 - p.ts_rmin) / p.ts_step) + 3))::int
              ELSE p.n + 1 END],
        ARRAY[CASE WHEN p.ts_step > 0 AND p.ts_rmax IS NOT NULL
              THEN greatest(0, least(p.n,
                   floor(((date_part('epoch', last) - date_part('epoch', p.ts_base)) * 1000 - p.ts_rmax) / p.ts_step)))::int
              ELSE 0 END]
    ) AS s(lo, hi, lo_in, hi_in)
    CROSS JOIN LATERAL (
        SELECT p.ts_base + ((s.lo + u.o - 2) * p.ts_step + u.r) * INTERVAL '1 ms' AS ts, u.value, u.c, s.lo + u.o - 1 AS i
        FROM unnest(p.ts_r[s.lo:s.hi], p.value[s.lo:s.hi], p.created_r[s.lo:s.hi]) WITH ORDINALITY AS u(r, value, c, o)
    ) d
    WHERE p.variable_id = ANY(variables) AND first <= last
      AND p.day >= time_bucket(INTERVAL '1 day', first) AND p.day <= last
      AND (d.i BETWEEN s.lo_in AND s.hi_in OR d.ts >= first AND d.ts <= last)
$$;
