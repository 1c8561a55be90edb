WITH req AS (
  SELECT r.ord, r.public_id
  FROM unnest(?::text[]) WITH ORDINALITY AS r(public_id, ord)
),
vars AS (
  SELECT req.ord, v.id
  FROM req
  JOIN variables v ON v.public_id = req.public_id AND v.account_id = ?
),
zonecheck AS MATERIALIZED (
  SELECT coalesce(bool_and((s.at AT TIME ZONE ?) - (s.at AT TIME ZONE 'UTC') = make_interval(secs => p.off)), true) AS ok
  FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) AS p(lo, hi, off)
  CROSS JOIN LATERAL (
    SELECT generate_series(to_timestamp(p.lo / 1000.0), to_timestamp(p.hi / 1000.0), make_interval(secs => ?)) AS at
    UNION ALL
    SELECT to_timestamp(p.hi / 1000.0)
  ) s
),
pts AS (
    SELECT p.variable_id, p.first_ts AS ts, p.first_value AS value, p.last_ts AS lt, p.last_value AS lv,
           p.n, p.area_linear AS a0, p.increase AS inc0, true AS inr
    FROM (
        SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM (
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '86400 seconds' AS hi
        FROM value_days m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE (SELECT ok FROM zonecheck))) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
    ) u
    CROSS JOIN LATERAL (
      SELECT r.variable_id, r.ts, r.value FROM "values" r
      WHERE r.variable_id = u.variable_id AND r.ts >= u.lo AND r.ts < u.hi
      UNION ALL
      SELECT d.variable_id, d.ts, d.value FROM packed_dots(u.lo, u.hi - INTERVAL '1 microsecond') d
      WHERE d.variable_id = u.variable_id
    ) x
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?::timestamptz, ?::timestamptz) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars WHERE NOT (SELECT ok FROM zonecheck))) AND x.ts >= ? AND x.ts <= ?
    ) p
    UNION ALL
    SELECT e.variable_id, e.ts, e.value, e.ts, e.value, 1, 0::float8, 0::float8, e.inr
    FROM (SELECT DISTINCT id FROM (SELECT id FROM vars) i) v
    CROSS JOIN LATERAL (
      (SELECT * FROM (
        (SELECT variable_id, ts, value, false AS inr FROM "values" WHERE variable_id = v.id AND ts < ? ORDER BY ts DESC LIMIT 1)
        UNION ALL
        (SELECT variable_id, ts, value, false AS inr
         FROM packed_dots(packed_newest_day(v.id, 1, ?::timestamptz), ?::timestamptz) WHERE variable_id = v.id
         ORDER BY ts DESC LIMIT 1)
      ) b ORDER BY ts DESC LIMIT 1)
      UNION ALL
      (SELECT * FROM (
        (SELECT variable_id, ts, value, false AS inr FROM "values" WHERE variable_id = v.id AND ts > ?::timestamptz ORDER BY ts LIMIT 1)
        UNION ALL
        (SELECT x.variable_id, x.ts, x.value, false AS inr
         FROM (SELECT max(day) + interval '1 day' - interval '1 microsecond' AS last
               FROM (SELECT day FROM values_packed WHERE variable_id = v.id AND day >= time_bucket(interval '1 day', ?::timestamptz)
                     ORDER BY day LIMIT 2) d) b
         CROSS JOIN LATERAL packed_dots(?::timestamptz + interval '1 microsecond', b.last) x
         WHERE x.variable_id = v.id
         ORDER BY x.ts LIMIT 1)
      ) a ORDER BY ts LIMIT 1)
    ) e
),
origin AS MATERIALIZED (
  SELECT least(d.day AT TIME ZONE ?, (
    SELECT e FROM (SELECT (d.day - interval '1 day') AT TIME ZONE ? + interval '24 hours' AS e) x
    WHERE e AT TIME ZONE ? = d.day)) AS at FROM (SELECT (fp.ts AT TIME ZONE ?)::date::timestamp AS day FROM (SELECT ?::timestamptz AS ts) fp) d
),
sig AS (
  SELECT w.*, greatest(w.lt, w.lo) AS l, CASE WHEN w.ts1 IS NOT NULL THEN least(w.ts1, w.hi) END AS r
  FROM (
    SELECT p.variable_id, p.ts, p.lt, p.value AS fv, p.lv AS v, p.inr, p.n, p.a0, p.inc0,
           lag(p.lv) OVER w AS pv, lead(p.ts) OVER w AS ts1, lead(p.value) OVER w AS v1,
           ?::timestamptz AS lo, ?::timestamptz AS hi
    FROM pts p
    WINDOW w AS (PARTITION BY p.variable_id ORDER BY p.ts)
  ) w
),
iv AS (
  SELECT s.variable_id, s.l, s.r, round(date_part('epoch', s.l) * 1000)::bigint AS lm, round(date_part('epoch', s.r) * 1000)::bigint AS rm,
         round(date_part('epoch', s.lt) * 1000)::bigint AS t, s.v, round(date_part('epoch', s.ts1) * 1000)::bigint AS t1, s.v1
  FROM sig s
  WHERE s.r > s.l
    AND (round(date_part('epoch', s.ts1) * 1000)::bigint - round(date_part('epoch', s.lt) * 1000)::bigint)::float8 <= ?::float8
),
buckets AS (
  SELECT vars.ord, b.key, ieee_finite(area / nullif(cov, 0)) AS value
  FROM (
    SELECT q.variable_id, q.key, sum(q.b - q.a) AS cov, ieee_join(sum(q.area) FILTER (WHERE abs(q.area) < 1e290), sum(ieee_down(q.area)) FILTER (WHERE NOT abs(q.area) < 1e290)) AS area
    FROM (SELECT q.variable_id, q.key, q.a, q.b, ieee_of(((q.v::text::numeric + (q.v1::text::numeric - q.v::text::numeric) * (q.a - q.t) / (q.t1 - q.t)) + (q.v::text::numeric + (q.v1::text::numeric - q.v::text::numeric) * (q.b - q.t) / (q.t1 - q.t))) / 2 * (q.b - q.a)) AS area FROM (
      SELECT i.variable_id, k.key, i.t, i.v, i.t1, i.v1, greatest(i.lm, round(date_part('epoch', k.key) * 1000)::bigint) AS a, least(i.rm, round(date_part('epoch', k.key + make_interval(hours => ?)) * 1000)::bigint) AS b
      FROM iv i
      CROSS JOIN LATERAL generate_series(time_bucket(make_interval(hours => ?), i.l, (SELECT at FROM origin)), time_bucket(make_interval(hours => ?), (i.r - interval '1 microsecond'), (SELECT at FROM origin)), make_interval(hours => ?)) AS k(key)
    ) q
    WHERE q.b > q.a
      UNION ALL
      SELECT s.variable_id, time_bucket(make_interval(hours => ?), s.ts, (SELECT at FROM origin)), round(date_part('epoch', s.ts) * 1000)::bigint, round(date_part('epoch', s.lt) * 1000)::bigint, s.a0
      FROM sig s
      WHERE s.inr AND s.lt > s.ts) q
    GROUP BY 1, 2
  ) b
  JOIN vars ON vars.id = b.variable_id
),
gapped AS (
  SELECT ord FROM buckets GROUP BY ord HAVING min(key) + (count(*) - 1) * make_interval(hours => ?) <> max(key)
),
gaps AS (
  SELECT b.ord, k.key, NULL::float8 AS value
  FROM (SELECT ord, key, lead(key) OVER (PARTITION BY ord ORDER BY key) AS next
        FROM buckets WHERE ord IN (SELECT ord FROM gapped)) b
  CROSS JOIN LATERAL generate_series(b.key + make_interval(hours => ?), b.next - make_interval(hours => ?), make_interval(hours => ?)) AS k(key)
  WHERE b.next > b.key + make_interval(hours => ?)
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