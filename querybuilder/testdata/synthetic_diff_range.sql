SELECT s.ts, s.value
FROM (
SELECT f1.ts, f1.value FROM (
SELECT w.ts, finite_add(w.value, -lag(w.value) OVER (ORDER BY w.ts)) AS value FROM (
SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= coalesce((SELECT q.ts FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond')
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, (?::timestamptz - interval '1 millisecond')::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) q ORDER BY q.ts DESC OFFSET 0 LIMIT 1), '-infinity'::timestamptz)
UNION ALL SELECT ts, value FROM packed_dots(coalesce((SELECT q.ts FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond')
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, (?::timestamptz - interval '1 millisecond')::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) q ORDER BY q.ts DESC OFFSET 0 LIMIT 1), '-infinity'::timestamptz)::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0
) w
) f1 WHERE f1.value IS NOT NULL AND f1.ts >= ?::timestamptz
) s
ORDER BY s.ts