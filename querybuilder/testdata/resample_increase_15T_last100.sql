WITH req AS (
  SELECT r.ord, r.public_id
  FROM unnest(?::text[]) WITH ORDINALITY AS r(public_id, ord)
),
vars AS (
  SELECT req.ord, v.id
  FROM req
  JOIN variables v ON v.public_id = req.public_id AND v.account_id = ?
),
pts AS (
    SELECT p.variable_id, p.ts, p.value, row_number() OVER (PARTITION BY p.variable_id ORDER BY p.ts DESC) <= 100 AS inr
    FROM (SELECT DISTINCT id FROM (SELECT id FROM vars) i) v
    CROSS JOIN LATERAL (
      SELECT * FROM (
        (SELECT variable_id, ts, value FROM "values" WHERE variable_id = v.id ORDER BY ts DESC LIMIT 101)
        UNION ALL
        SELECT variable_id, ts, value
        FROM packed_dots(packed_newest_day(v.id, 101, 'infinity'), 'infinity') WHERE variable_id = v.id
      ) both_layouts
      ORDER BY ts DESC
      LIMIT 101
    ) p
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT min(ts) AS ts FROM pts WHERE inr) fp) d
),
sig AS (
  SELECT w.*, greatest(w.ts, w.lo) AS l, CASE WHEN w.ts1 IS NOT NULL THEN least(w.ts1, w.hi) END AS r
  FROM (
    SELECT p.variable_id, p.ts, p.value AS v, p.inr,
           lag(p.value) OVER w AS pv, lead(p.ts) OVER w AS ts1, lead(p.value) OVER w AS v1,
           min(p.ts) FILTER (WHERE p.inr) OVER (PARTITION BY p.variable_id) AS lo, 'infinity'::timestamptz AS hi
    FROM pts p
    WINDOW w AS (PARTITION BY p.variable_id ORDER BY p.ts)
  ) w
),
buckets AS (
  SELECT vars.ord, b.key, ieee_finite(CASE WHEN nv > 0 THEN coalesce(inc, 0) END) AS value
  FROM (
    SELECT c.variable_id, c.key, sum(c.inc) AS inc, count(*) AS nv
    FROM (SELECT pts.variable_id, time_bucket(make_interval(mins => ?), pts.ts, (SELECT at FROM origin)) AS key, CASE WHEN pv IS NULL THEN 0 WHEN v >= pv THEN v - pv ELSE v END AS inc FROM sig pts WHERE pts.inr) c
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * make_interval(mins => ?) <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, NULL::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + make_interval(mins => ?), b.next - make_interval(mins => ?), make_interval(mins => ?)) AS k(key)
  WHERE b.next > b.key + make_interval(mins => ?)
),
filled AS (
  SELECT g.ord, g.key AS label, g.value
  FROM (SELECT ord, key, value FROM buckets UNION ALL SELECT ord, key, value FROM gaps) g
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', label) * 1000)::bigint, value FROM filled
ORDER BY 1, 2 DESC