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
  SELECT vars.ord, p.ts, p.value
  FROM vars
  JOIN "values" p ON p.variable_id = vars.id AND p.ts <= ?
),
result AS (
  SELECT 0 AS ord, ts, value FROM pts ORDER BY value DESC, ts LIMIT 1
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, (extract(epoch FROM ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST