SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, CASE WHEN (abs(s1.value) BETWEEN 1e-30 AND 1e30 OR s1.value = 0) AND (abs(s2.value) BETWEEN 1e-30 AND 1e30 OR s2.value = 0)
  THEN (s1.value) / nullif((s2.value), 0)
  ELSE finite_div((s1.value), (s2.value)) END AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= ?::timestamptz AND ts <= ?::timestamptz
UNION ALL SELECT ts, value FROM packed_dots(?::timestamptz::timestamptz, ?::timestamptz::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s1
JOIN (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= ?::timestamptz AND ts <= ?::timestamptz
UNION ALL SELECT ts, value FROM packed_dots(?::timestamptz::timestamptz, ?::timestamptz::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) s2 ON s2.ts = s1.ts
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts