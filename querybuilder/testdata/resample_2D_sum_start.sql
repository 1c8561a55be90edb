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
  SELECT vars.ord, p.*
  FROM vars
  JOIN (
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= now()
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= now()
  ) p ON p.variable_id = vars.id
),
origin AS MATERIALIZED (
  SELECT (fp.ts AT TIME ZONE ?)::date AS day FROM (SELECT min(f.ts) AS ts FROM vars CROSS JOIN LATERAL (
    (SELECT ts FROM "values" WHERE variable_id = vars.id AND ts >= ? AND ts <= now()
    ORDER BY ts LIMIT 1)
    UNION ALL
    (SELECT first_ts FROM value_minutes WHERE variable_id = vars.id AND tile >= ? AND tile < ?
    ORDER BY tile LIMIT 1)) f) fp
),
buckets AS (
  SELECT pts.ord, (origin.day + ((pts.ts AT TIME ZONE ?)::date - origin.day) / ? * ?)::timestamp AS key, sum(sum) AS value
  FROM pts, origin
  GROUP BY 1, 2
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * make_interval(days => ?) <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, 0::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + make_interval(days => ?), b.next - make_interval(days => ?), make_interval(days => ?)) AS k(key)
  WHERE b.next > b.key + make_interval(days => ?)
),
filled AS (
  SELECT g.ord, least(g.key AT TIME ZONE ?, (
    SELECT e FROM (SELECT (g.key - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = g.key)) AS label, g.value
  FROM (SELECT ord, key, value FROM buckets UNION ALL SELECT ord, key, value FROM gaps) g
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', label) * 1000)::bigint, value FROM filled
ORDER BY 1, 2 DESC