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
    SELECT p.variable_id, p.first_ts AS ts, p.first_value AS value, p.last_ts AS lt, p.last_value AS lv,
           p.n, p.area_linear AS a0, p.increase AS inc0, true AS inr
    FROM (
        SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM (
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '86400 seconds' AS hi
        FROM value_days m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM vars)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
    ) u
    CROSS JOIN LATERAL (
      SELECT r.variable_id, r.ts, r.value FROM "values" r
      WHERE r.variable_id = u.variable_id AND r.ts >= u.lo AND r.ts < u.hi
      UNION ALL
      SELECT d.variable_id, d.ts, d.value FROM packed_dots(u.lo, u.hi - INTERVAL '1 microsecond') d
      WHERE d.variable_id = u.variable_id
    ) x
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
tw AS (
  SELECT variable_id, coalesce(sum(cov), 0) AS cov, ieee_join(sum(area) FILTER (WHERE abs(area) < 1e290), sum(ieee_down(area)) FILTER (WHERE NOT abs(area) < 1e290)) AS area, ieee_join(sum(inc) FILTER (WHERE abs(inc) < 1e290), sum(ieee_down(inc)) FILTER (WHERE NOT abs(inc) < 1e290)) AS inc,
         sum(nv) AS nv, max(last_ts) AS last_ts
  FROM (
    SELECT q.variable_id, q.rm - q.lm AS cov, ieee_of(((q.v::text::numeric + (q.v1::text::numeric - q.v::text::numeric) * (q.lm - q.t) / (q.t1 - q.t)) + (q.v::text::numeric + (q.v1::text::numeric - q.v::text::numeric) * (q.rm - q.t) / (q.t1 - q.t))) / 2 * (q.rm - q.lm)) AS area,
           NULL::float8 AS inc, 0 AS nv, NULL::timestamptz AS last_ts
    FROM iv q
    UNION ALL
    SELECT variable_id, round(date_part('epoch', lt) * 1000)::bigint - round(date_part('epoch', ts) * 1000)::bigint, a0, inc0 + CASE WHEN pv IS NULL THEN 0 WHEN fv >= pv THEN ieee_add(fv, -pv) ELSE fv END, n, lt
    FROM sig
    WHERE inr
  ) u
  GROUP BY variable_id
),
result AS (
  SELECT 0 AS ord, coalesce(last_ts, ?::timestamptz) AS ts, ieee_finite(area / nullif(cov, 0)) AS value
  FROM (SELECT sum(cov) AS cov, ieee_join(sum(area) FILTER (WHERE abs(area) < 1e290), sum(ieee_down(area)) FILTER (WHERE NOT abs(area) < 1e290)) AS area, ieee_join(sum(inc) FILTER (WHERE abs(inc) < 1e290), sum(ieee_down(inc)) FILTER (WHERE NOT abs(inc) < 1e290)) AS inc, sum(nv) AS nv, max(last_ts) AS last_ts
        FROM tw WHERE cov > 0 OR nv > 0) j
  WHERE cov > 0 OR nv > 0
)
SELECT r.ord, NULL::bigint AS ts, NULL::float8 AS value
FROM req r
WHERE NOT EXISTS (SELECT 1 FROM vars v WHERE v.ord = r.ord)
UNION ALL
SELECT ord, round(date_part('epoch', ts) * 1000)::bigint, value FROM result
ORDER BY 1, 2 NULLS FIRST