SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, finite_add((finite_div((finite_mul((s1.value), (?::float8))), (?::float8))), (?::float8)) AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s1
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts