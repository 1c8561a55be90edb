SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, CASE WHEN (abs(s1.value) BETWEEN 1e-30 AND 1e30 OR s1.value = 0)
  THEN (((s1.value) * (?::float8)) / nullif((?::float8), 0)) + (?::float8)
  ELSE finite_add((finite_div((finite_mul((s1.value), (?::float8))), (?::float8))), (?::float8)) END AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s1
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts