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
    WHERE x.variable_id = vars.id AND x.ts <= ? AND x.ts < ?
    UNION ALL
    SELECT x.ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 THEN 0::float8 END AS m2
    FROM "values" x
    WHERE x.variable_id = vars.id AND x.ts <= ? AND x.ts >= greatest(?::timestamptz, ?::timestamptz)
  ) p
),
result AS (
  SELECT 0 AS ord, ts, value FROM (
  SELECT e.ord, coalesce(t.ts, e.ts) AS ts, e.value
  FROM (SELECT ord, first(ts, ROW(-max, ts)) AS ts, max(max) AS value FROM pts GROUP BY ord) e
  JOIN vars ON vars.ord = e.ord
  LEFT JOIN LATERAL (
    SELECT x.ts FROM "values" x
    WHERE x.variable_id = vars.id AND x.ts >= e.ts AND x.ts < e.ts + interval '1 minute' AND x.value = e.value
    ORDER BY x.ts LIMIT 1
  ) t ON true
) e ORDER BY value DESC, ts LIMIT 1
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, (extract(epoch FROM ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST