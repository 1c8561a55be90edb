SELECT s.ts, s.value
FROM (
SELECT f1.ts, f1.value FROM (
SELECT w.ts, finite_add(w.value, -lag(w.value) OVER (ORDER BY w.ts)) AS value FROM (
SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= coalesce((SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond') ORDER BY ts DESC LIMIT 1)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(?::bigint, 1, (?::timestamptz - interval '1 millisecond')), (?::timestamptz - interval '1 millisecond')) WHERE variable_id = ?::bigint ORDER BY ts DESC LIMIT 1)
) u ORDER BY u.ts DESC OFFSET 0 LIMIT 1), '-infinity'::timestamptz)
UNION ALL SELECT ts, value FROM packed_dots(coalesce((SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond') ORDER BY ts DESC LIMIT 1)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(?::bigint, 1, (?::timestamptz - interval '1 millisecond')), (?::timestamptz - interval '1 millisecond')) WHERE variable_id = ?::bigint ORDER BY ts DESC LIMIT 1)
) u ORDER BY u.ts DESC OFFSET 0 LIMIT 1), '-infinity'::timestamptz)::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0
) w
) f1 WHERE f1.value IS NOT NULL AND f1.ts >= ?::timestamptz
) s
ORDER BY s.ts