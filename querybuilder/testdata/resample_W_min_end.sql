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
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.min
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.min
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.min
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.min
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.min
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, x.value AS min
    FROM packed_dots('-infinity'::timestamptz, ?::timestamptz) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts <= ?
),
buckets AS (
  SELECT vars.ord, b.key, b.value
  FROM (
    SELECT pts.variable_id, date_trunc('week', pts.ts AT TIME ZONE ?) AS key, min(min) AS value
    FROM pts
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * interval '7 days' <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, NULL::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + interval '7 days', b.next - interval '7 days', interval '7 days') AS k(key)
  WHERE b.next > b.key + interval '7 days'
),
filled AS (
  SELECT g.ord, least((g.key + interval '6 days') AT TIME ZONE ?, (
    SELECT e FROM (SELECT ((g.key + interval '6 days') - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = (g.key + interval '6 days'))) AS label, g.value
  FROM (SELECT ord, key, value FROM buckets UNION ALL SELECT ord, key, value FROM gaps) g
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', label) * 1000)::bigint, value FROM filled
ORDER BY 1, 2 DESC