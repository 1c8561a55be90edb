SELECT s.ts, s.value
FROM (
SELECT f1.ts, f1.value FROM (
SELECT w.ts, ieee_finite(ieee_join(sum(w.value) FILTER (WHERE abs(w.value) < 1e290) OVER (ORDER BY w.ts ROWS UNBOUNDED PRECEDING), sum(ieee_down(w.value)) FILTER (WHERE NOT abs(w.value) < 1e290) OVER (ORDER BY w.ts ROWS UNBOUNDED PRECEDING))) AS value FROM (
WITH carry AS MATERIALIZED (
  SELECT p.ts, (SELECT v.value FROM (
      (SELECT value FROM "values" WHERE variable_id = ?::bigint AND ts = p.ts)
      UNION ALL
      (SELECT value FROM packed_dots(p.ts, p.ts) WHERE variable_id = ?::bigint)) v LIMIT 1) AS value
  FROM (SELECT (SELECT u.ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint AND ts <= (?::timestamptz - interval '1 millisecond') ORDER BY ts DESC LIMIT 1)
  UNION ALL
  (SELECT ts FROM packed_dots(packed_newest_day(?::bigint, 1, (?::timestamptz - interval '1 millisecond')), (?::timestamptz - interval '1 millisecond')) WHERE variable_id = ?::bigint ORDER BY ts DESC LIMIT 1)
) u ORDER BY u.ts DESC OFFSET 0 LIMIT 1) AS ts) p
)
SELECT k.ts, k.value FROM carry k WHERE k.value IS NOT NULL
UNION ALL
SELECT x.ts, x.value FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= ?::timestamptz
UNION ALL SELECT ts, value FROM packed_dots(?::timestamptz::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) x WHERE EXISTS (SELECT FROM carry k WHERE k.ts IS NULL OR k.value IS NOT NULL)
UNION ALL
SELECT y.ts, y.value FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) y WHERE NOT EXISTS (SELECT FROM carry k WHERE k.ts IS NULL OR k.value IS NOT NULL)
) w
) f1 WHERE f1.value IS NOT NULL AND f1.ts >= ?::timestamptz
) s
ORDER BY s.ts