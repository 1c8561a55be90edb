SELECT s.ts, s.value
FROM (
SELECT w1.ts, w1.value FROM (
WITH pts AS (
  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_dots('-infinity'::timestamptz, 'infinity'::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) a
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT min(u.ts) AS ts FROM (
  (SELECT ts FROM "values" WHERE variable_id = ?::bigint ORDER BY ts LIMIT 1)
  UNION ALL
  (SELECT p.ts_base + p.ts_r[1] * INTERVAL '1 ms' FROM values_packed p WHERE p.variable_id = ?::bigint ORDER BY p.day LIMIT 1)
) u) fp) d
)
SELECT g.key AS ts, g.value FROM (
  SELECT time_bucket(make_interval(hours => ?), pts.ts, (SELECT at FROM origin)) AS key, finite_div(ieee_join(sum(sum) FILTER (WHERE abs(sum) < 1e290), sum(ieee_down(sum)) FILTER (WHERE NOT abs(sum) < 1e290)), sum(n)) AS value FROM pts GROUP BY 1
) g
) w1 WHERE w1.value IS NOT NULL AND TRUE
) s
ORDER BY s.ts