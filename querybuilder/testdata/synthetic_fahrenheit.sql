SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, (((s1.value) * (?::float8)) / nullif((?::float8), 0)) + (?::float8) AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_values(ARRAY[?::bigint], '-infinity'::timestamptz, 'infinity'::timestamptz) OFFSET 0) s1
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts