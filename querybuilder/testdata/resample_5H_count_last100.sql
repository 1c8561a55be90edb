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
    SELECT p.*
    FROM (SELECT DISTINCT id FROM vars) v
    CROSS JOIN LATERAL (
      SELECT * FROM (
        (SELECT variable_id, ts AS ts, 1 AS n FROM "values"
         WHERE variable_id = v.id
         ORDER BY ts DESC
         LIMIT 100)
        UNION ALL
        SELECT variable_id, ts AS ts, 1 AS n
        FROM packed_values(ARRAY[v.id], packed_newest_day(v.id, 100, 'infinity'), 'infinity')
      ) both_layouts
      ORDER BY ts DESC
      LIMIT 100
    ) p
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT min(ts) AS ts FROM pts) fp) d
),
buckets AS (
  SELECT vars.ord, b.key, b.value
  FROM (
    SELECT pts.variable_id, time_bucket(make_interval(hours => ?), pts.ts, (SELECT at FROM origin)) AS key, sum(n)::float8 AS value
    FROM pts
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * make_interval(hours => ?) <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, 0::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + make_interval(hours => ?), b.next - make_interval(hours => ?), make_interval(hours => ?)) AS k(key)
  WHERE b.next > b.key + make_interval(hours => ?)
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