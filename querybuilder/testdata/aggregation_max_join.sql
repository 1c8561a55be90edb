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
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ?
  ) p ON p.variable_id = vars.id
),
result AS (
  SELECT 0 AS ord, ts, value FROM (
  SELECT ord, first(max_ts, ROW(-max, max_ts)) AS ts, max(max) AS value FROM pts GROUP BY ord
) e ORDER BY value DESC, ts LIMIT 1
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST