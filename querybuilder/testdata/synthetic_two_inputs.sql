SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s1.ts, (s1.value) / nullif((s2.value), 0) AS value
FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= ?::timestamptz AND ts <= ?::timestamptz
UNION ALL SELECT ts, value FROM packed_values(ARRAY[?::bigint], ?::timestamptz::timestamptz, ?::timestamptz::timestamptz) OFFSET 0) s1
JOIN (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= ?::timestamptz AND ts <= ?::timestamptz
UNION ALL SELECT ts, value FROM packed_values(ARRAY[?::bigint], ?::timestamptz::timestamptz, ?::timestamptz::timestamptz) OFFSET 0) s2 ON s2.ts = s1.ts
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts