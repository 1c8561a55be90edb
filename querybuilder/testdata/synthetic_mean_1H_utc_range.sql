SELECT s.ts, s.value
FROM (
SELECT w1.ts, w1.value FROM (
WITH pts AS (
  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND ts >= time_bucket(interval '3600 seconds', ?::timestamptz) AND ts <= (time_bucket(interval '3600 seconds', ?::timestamptz) + interval '3600 seconds' - interval '1 microsecond')
UNION ALL SELECT ts, value FROM packed_dots(time_bucket(interval '3600 seconds', ?::timestamptz)::timestamptz, (time_bucket(interval '3600 seconds', ?::timestamptz) + interval '3600 seconds' - interval '1 microsecond')::timestamptz) WHERE variable_id = ?::bigint OFFSET 0) a
)
SELECT g.key AS ts, g.value FROM (
  SELECT time_bucket(make_interval(hours => ?), pts.ts) AS key, finite_div(ieee_join(sum(sum) FILTER (WHERE abs(sum) < 1e290), sum(ieee_down(sum)) FILTER (WHERE NOT abs(sum) < 1e290)), sum(n)) AS value FROM pts GROUP BY 1
) g
) w1 WHERE w1.value IS NOT NULL AND w1.ts >= ?::timestamptz AND w1.ts <= ?::timestamptz
) s
ORDER BY s.ts