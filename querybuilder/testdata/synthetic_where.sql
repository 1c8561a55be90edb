SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, CASE WHEN (((CASE WHEN (s1.value) >= 0 THEN sqrt((s1.value)) END) > (?::float8))::int::float8) IS NULL THEN NULL WHEN (((CASE WHEN (s1.value) >= 0 THEN sqrt((s1.value)) END) > (?::float8))::int::float8) <> 0 THEN (round(((CASE WHEN (s1.value) > 0 THEN ln((s1.value)) END))::text::numeric, 0)::float8) ELSE (s3.value) END AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s1
JOIN (SELECT w2.ts, w2.value FROM (
WITH pts AS (
  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) a
)
SELECT g.key AS ts, g.value FROM (
  SELECT time_bucket(make_interval(mins => ?), pts.ts) AS key, max(max) AS value FROM pts GROUP BY 1
) g
) w2 WHERE w2.value IS NOT NULL AND TRUE) s3 ON s3.ts = s1.ts
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts