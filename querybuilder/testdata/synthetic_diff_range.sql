SELECT s.ts, s.value
FROM (
SELECT f1.ts, f1.value FROM (
SELECT w.ts, w.value - lag(w.value) OVER (ORDER BY w.ts) AS value FROM (
SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= coalesce((SELECT q.ts FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond')) q ORDER BY q.ts DESC OFFSET 0 LIMIT 1), '-infinity'::timestamptz)
) w
) f1 WHERE f1.value IS NOT NULL AND f1.ts >= ?::timestamptz
) s
ORDER BY s.ts