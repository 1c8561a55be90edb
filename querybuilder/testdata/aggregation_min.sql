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
    SELECT ts, 1 AS n, value AS sum, value AS min, value AS max, CASE WHEN abs(value) <= 1e150 THEN 0::float8 END AS ks, CASE WHEN abs(value) <= 1e150 THEN 0::float8 END AS m2 FROM "values"
    WHERE variable_id = vars.id
    ORDER BY ts DESC
    LIMIT 100
  ) p
),
result AS (
  SELECT e.ord, coalesce(t.ts, e.ts) AS ts, e.value
  FROM (SELECT ord, first(ts, ROW(min, ts)) AS ts, min(min) AS value FROM pts GROUP BY ord) e
  JOIN vars ON vars.ord = e.ord
  LEFT JOIN LATERAL (
    SELECT x.ts FROM "values" x
    WHERE x.variable_id = vars.id AND x.ts >= e.ts AND x.ts < e.ts + interval '1 minute' AND x.value = e.value
    ORDER BY x.ts LIMIT 1
  ) t ON true
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, (extract(epoch FROM ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST