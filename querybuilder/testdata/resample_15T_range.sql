WITH req AS (
  SELECT r.ord, r.public_id
  FROM unnest(?::text[]) WITH ORDINALITY AS r(public_id, ord)
),
vars AS (
  SELECT req.ord, v.id
  FROM req
  JOIN variables v ON v.public_id = req.public_id AND v.account_id = ?
),
zonecheck AS MATERIALIZED (
  SELECT coalesce(bool_and((s.at AT TIME ZONE ?) - (s.at AT TIME ZONE 'UTC') = make_interval(secs => p.off)), true) AS ok
  FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) AS p(lo, hi, off)
  CROSS JOIN LATERAL (
    SELECT generate_series(to_timestamp(p.lo / 1000.0), to_timestamp(p.hi / 1000.0), make_interval(secs => ?)) AS at
    UNION ALL
    SELECT to_timestamp(p.hi / 1000.0)
  ) s
),
pts AS (
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum
    FROM packed_dots(?::timestamptz, ?::timestamptz) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT min(f.ts) AS ts FROM vars CROSS JOIN LATERAL (
    (SELECT ts FROM "values" WHERE variable_id = vars.id AND ts >= ? AND ts <= ?
    ORDER BY ts LIMIT 1)
    UNION ALL
    (SELECT min(CASE WHEN p.ts_base >= ?::timestamptz THEN p.ts_base ELSE
         (SELECT min(x.ts) FROM packed_dots(?::timestamptz, least(p.day + INTERVAL '1 day' - INTERVAL '1 microsecond', ?::timestamptz)) x WHERE x.variable_id = p.variable_id) END)
     FROM (SELECT variable_id, day, ts_base FROM values_packed WHERE variable_id = vars.id
           AND day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?::timestamptz
           ORDER BY day LIMIT 2) p
     WHERE p.ts_base <= ?::timestamptz)
    UNION ALL
    (SELECT first_ts FROM value_minutes WHERE variable_id = vars.id AND tile >= ? AND tile < ?
    ORDER BY tile LIMIT 1)) f) fp) d
),
buckets AS (
  SELECT vars.ord, b.key, b.value
  FROM (
    SELECT pts.variable_id, time_bucket(make_interval(mins => ?), pts.ts, (SELECT at FROM origin)) AS key, finite_div(sum(sum), sum(n)) AS value
    FROM pts
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * make_interval(mins => ?) <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, NULL::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + make_interval(mins => ?), b.next - make_interval(mins => ?), make_interval(mins => ?)) AS k(key)
  WHERE b.next > b.key + make_interval(mins => ?)
),
filled AS (
  SELECT g.ord, g.key AS label, g.value
  FROM (SELECT ord, key, value FROM buckets UNION ALL SELECT ord, key, value FROM gaps) g
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', label) * 1000)::bigint, value FROM filled
ORDER BY 1, 2 DESC