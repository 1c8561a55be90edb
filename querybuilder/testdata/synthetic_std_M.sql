SELECT s.ts, s.value
FROM (
SELECT w1.ts, w1.value FROM (
WITH pts AS (
  SELECT ts, value, 1 AS n, value AS sum, value AS min, value AS max FROM (SELECT ts, value FROM "values" WHERE variable_id = ?::bigint AND TRUE
UNION ALL SELECT ts, value FROM packed_values(ARRAY[?::bigint], '-infinity'::timestamptz, 'infinity'::timestamptz) OFFSET 0) a
)
SELECT least((g.key + interval '1 month' - interval '1 day') AT TIME ZONE ?, (
    SELECT e FROM (SELECT ((g.key + interval '1 month' - interval '1 day') - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = (g.key + interval '1 month' - interval '1 day'))) AS ts, g.value FROM (
  SELECT date_trunc('month', pts.ts AT TIME ZONE ?) AS key, stddev_samp(value) AS value FROM pts GROUP BY 1
) g
) w1 WHERE w1.value IS NOT NULL AND TRUE
) s
ORDER BY s.ts