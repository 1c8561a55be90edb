WITH req AS (
  SELECT r.ord, r.public_id
  FROM unnest(?::text[]) WITH ORDINALITY AS r(public_id, ord)
),
vars AS (
  SELECT req.ord, v.id
  FROM req
  JOIN variables v ON v.public_id = req.public_id AND v.account_id = ?
),
pts AS (
  SELECT vars.ord, p.ts, p.n, p.sum, p.min, p.max
  FROM vars
  CROSS JOIN LATERAL (
    SELECT m.minute AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2
    FROM value_minutes m
    WHERE m.variable_id = vars.id AND m.minute >= ? AND m.minute < ?::timestamptz
    UNION ALL
    SELECT x.ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2
    FROM "values" x
    WHERE x.variable_id = vars.id AND x.ts >= ? AND x.ts <= ? AND x.ts < ?
    UNION ALL
    SELECT x.ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2
    FROM "values" x
    WHERE x.variable_id = vars.id AND x.ts >= ? AND x.ts <= ? AND x.ts >= greatest(?::timestamptz, ?::timestamptz)
  ) p
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT min(f.ts) AS ts FROM vars CROSS JOIN LATERAL (
    SELECT ts FROM "values" WHERE variable_id = vars.id AND ts >= ? AND ts <= ?
    ORDER BY ts LIMIT 1) f) fp) d
),
buckets AS (
  SELECT pts.ord, time_bucket(make_interval(mins => ?), pts.ts, origin.at) AS key, sum(sum) / sum(n) AS value
  FROM pts, origin
  GROUP BY 1, 2
),
spans AS (
  SELECT ord, min(key) AS lo, max(key) AS hi FROM buckets GROUP BY ord
),
grid AS (
  SELECT ord, key, value FROM buckets
  UNION ALL
  SELECT s.ord, k.key, NULL
  FROM spans s
  CROSS JOIN LATERAL generate_series(s.lo, s.hi, make_interval(mins => ?)) AS k(key)
),
filled AS (
  SELECT g.ord, g.key AS label, max(g.value) AS value
  FROM grid g
  GROUP BY g.ord, g.key
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, (extract(epoch FROM label) * 1000)::bigint, value FROM filled
ORDER BY 1, 2 DESC