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
  SELECT vars.ord, p.*
  FROM vars
  JOIN (
    SELECT p.*
    FROM (SELECT DISTINCT id FROM vars) v
    CROSS JOIN LATERAL (
      SELECT * FROM (
        (SELECT variable_id, ts AS ts, 1 AS n, value AS sum, value AS min, value AS max, CASE WHEN abs(value) <= 1e150 AND (value = 0 OR abs(value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(value) <= 1e150 AND (value = 0 OR abs(value) >= 1e-100) THEN 0::float8 END AS m2, ts AS first_ts, value AS first_value, ts AS last_ts, value AS last_value, ts AS min_ts, ts AS max_ts FROM "values"
         WHERE variable_id = v.id
         ORDER BY ts DESC
         LIMIT 100)
        UNION ALL
        SELECT variable_id, ts AS ts, 1 AS n, value AS sum, value AS min, value AS max, CASE WHEN abs(value) <= 1e150 AND (value = 0 OR abs(value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(value) <= 1e150 AND (value = 0 OR abs(value) >= 1e-100) THEN 0::float8 END AS m2, ts AS first_ts, value AS first_value, ts AS last_ts, value AS last_value, ts AS min_ts, ts AS max_ts
        FROM packed_dots(packed_newest_day(v.id, 100, 'infinity'), 'infinity') WHERE variable_id = v.id
      ) both_layouts
      ORDER BY ts DESC
      LIMIT 100
    ) p
  ) p ON p.variable_id = vars.id
),
result AS (
  SELECT ord, first(min_ts, ROW(min, min_ts)) AS ts, min(min) AS value FROM pts GROUP BY ord
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST