SELECT s.ts, s.value
FROM (
SELECT p.ts, p.value FROM (
SELECT s2.ts, CASE WHEN (abs(s2.value) BETWEEN 1e-30 AND 1e30 OR s2.value = 0) AND (abs(s4.value) BETWEEN 1e-30 AND 1e30 OR s4.value = 0)
  THEN (s2.value) - (s4.value)
  ELSE finite_add((s2.value), -((s4.value))) END AS value
FROM (SELECT f1.ts, f1.value FROM (
SELECT w.ts, ieee_finite(ieee_join(sum(w.value) FILTER (WHERE abs(w.value) < 1e290) OVER (ORDER BY w.ts ROWS UNBOUNDED PRECEDING), sum(ieee_down(w.value)) FILTER (WHERE NOT abs(w.value) < 1e290) OVER (ORDER BY w.ts ROWS UNBOUNDED PRECEDING))) AS value FROM (
SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0
) w
) f1 WHERE f1.value IS NOT NULL AND f1.ts >= ?::timestamptz) s2
JOIN (SELECT f3.ts, f3.value FROM (
SELECT w.ts, lag(w.value, 2) OVER (ORDER BY w.ts) AS value FROM (
SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= coalesce((SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond') ORDER BY ts DESC LIMIT 2)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(?::bigint, 2, (?::timestamptz - interval '1 millisecond')), (?::timestamptz - interval '1 millisecond')) WHERE variable_id = ?::bigint ORDER BY ts DESC LIMIT 2)
) u ORDER BY u.ts DESC OFFSET 1 LIMIT 1), '-infinity'::timestamptz)
UNION ALL SELECT ts, value FROM packed_dots(coalesce((SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond') ORDER BY ts DESC LIMIT 2)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(?::bigint, 2, (?::timestamptz - interval '1 millisecond')), (?::timestamptz - interval '1 millisecond')) WHERE variable_id = ?::bigint ORDER BY ts DESC LIMIT 2)
) u ORDER BY u.ts DESC OFFSET 1 LIMIT 1), '-infinity'::timestamptz)::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0
) w
) f3 WHERE f3.value IS NOT NULL AND f3.ts >= ?::timestamptz) s4 ON s4.ts = s2.ts
) p WHERE p.value IS NOT NULL
) s
ORDER BY s.ts