SELECT s.ts, s.value
FROM (
SELECT w5.ts, w5.value FROM (
WITH pts AS (
  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (SELECT p.ts, p.value FROM (
SELECT s3.ts, CASE WHEN (abs(s3.value) BETWEEN 1e-30 AND 1e30 OR s3.value = 0) AND (abs(s4.value) BETWEEN 1e-30 AND 1e30 OR s4.value = 0)
  THEN (s3.value) * (s4.value)
  ELSE finite_mul((s3.value), (s4.value)) END AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= (?::timestamptz - interval '7200 seconds') AND ts <= (?::timestamptz + interval '93600 seconds')
UNION ALL SELECT ts, value FROM packed_dots((?::timestamptz - interval '7200 seconds')::timestamptz, (?::timestamptz + interval '93600 seconds')::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s3
JOIN (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= (?::timestamptz - interval '7200 seconds') AND ts <= (?::timestamptz + interval '93600 seconds')
UNION ALL SELECT ts, value FROM packed_dots((?::timestamptz - interval '7200 seconds')::timestamptz, (?::timestamptz + interval '93600 seconds')::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s4 ON s4.ts = s3.ts
) p WHERE p.value IS NOT NULL) a
)
SELECT least(g.key AT TIME ZONE ?, (
    SELECT e FROM (SELECT (g.key - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = g.key)) AS ts, g.value FROM (
  SELECT (pts.ts AT TIME ZONE ?)::date::timestamp AS key, ieee_finite(ieee_join(sum(sum) FILTER (WHERE abs(sum) < 1e290), sum(ieee_down(sum)) FILTER (WHERE NOT abs(sum) < 1e290))) AS value FROM pts GROUP BY 1
) g
) w5 WHERE w5.value IS NOT NULL AND w5.ts >= ?::timestamptz AND w5.ts <= ?::timestamptz
) s
ORDER BY s.ts