WITH req AS (
    SELECT *
    FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY
        AS r(variable_id, variable_label, device_id, device_label, ord)
),
res AS (
    SELECT r.ord, v.*
    FROM req r LEFT JOIN LATERAL (
    SELECT v.id, v.public_id, v.label, v.name, v.created_at,
           d.public_id AS device_public_id, d.label AS device_label, d.name AS device_name, d.created_at AS device_created_at
    FROM variables v JOIN devices d ON d.id = v.device_id
    WHERE v.account_id = ? AND v.public_id = r.variable_id
      AND (r.device_id = '' OR d.public_id = r.device_id)
      AND (r.device_label = '' OR d.label = r.device_label)
    UNION ALL
    SELECT v.id, v.public_id, v.label, v.name, v.created_at,
           d.public_id AS device_public_id, d.label AS device_label, d.name AS device_name, d.created_at AS device_created_at
    FROM devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.public_id = r.device_id AND v.label = r.variable_label
    UNION ALL
    SELECT v.id, v.public_id, v.label, v.name, v.created_at,
           d.public_id AS device_public_id, d.label AS device_label, d.name AS device_name, d.created_at AS device_created_at
    FROM devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.label = r.device_label AND v.label = r.variable_label
) v ON true
),
pts AS (
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.value AS sum, x.value AS min, x.value AS max, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS ks, CASE WHEN abs(x.value) <= 1e150 AND (x.value = 0 OR abs(x.value) >= 1e-100) THEN 0::float8 END AS m2, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, x.ts AS min_ts, x.ts AS max_ts
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.sum, m.min, m.max, m.ks, m.m2, m.first_ts, m.first_value, m.last_ts, m.last_value, m.min_ts, m.max_ts
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ?
),
s AS (
    SELECT x.variable_id, sum(x.n) AS n,
           finite_div(sum(x.sum), sum(x.n)) AS mean_value
    FROM pts x
    GROUP BY x.variable_id
),
spts AS (
    SELECT p.variable_id, p.first_ts AS ts, p.first_value AS value, p.last_ts AS lt, p.last_value AS lv,
           p.n, p.area_linear AS a0, p.increase AS inc0, true AS inr
    FROM (
        SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts < ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM "values" x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM packed_dots(?, ?) x
    WHERE x.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND x.ts >= ? AND x.ts <= ?
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_minutes m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_quarters m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT m.variable_id, m.tile AS ts, m.n, m.first_ts, m.first_value, m.last_ts, m.last_value, m.area_linear, m.increase
    FROM value_days m
    WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND coalesce(m.longest_ms::float8 <= ?::float8, false)
    UNION ALL
    SELECT x.variable_id, x.ts AS ts, 1 AS n, x.ts AS first_ts, x.value AS first_value, x.ts AS last_ts, x.value AS last_value, 0::float8 AS area_linear, 0::float8 AS increase
    FROM (
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '60 seconds' AS hi
        FROM value_minutes m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '900 seconds' AS hi
        FROM value_quarters m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
        UNION ALL
        SELECT m.variable_id, m.tile AS lo, m.tile + INTERVAL '86400 seconds' AS hi
        FROM value_days m
        WHERE m.variable_id = ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL)) AND m.tile >= ? AND m.tile < ? AND NOT coalesce(m.longest_ms::float8 <= ?::float8, false)
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
    FROM (SELECT DISTINCT id FROM (SELECT id FROM res WHERE id IS NOT NULL) i) v
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
    FROM spts p
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
  SELECT variable_id, coalesce(sum(cov), 0) AS cov, sum(area) AS area, sum(inc) AS inc,
         sum(nv) AS nv, max(last_ts) AS last_ts
  FROM (
    SELECT q.variable_id, q.rm - q.lm AS cov, ((q.v + (q.v1 - q.v) * (q.lm - q.t) / (q.t1 - q.t)::float8) + (q.v + (q.v1 - q.v) * (q.rm - q.t) / (q.t1 - q.t)::float8)) / 2 * (q.rm - q.lm) AS area,
           NULL::float8 AS inc, 0 AS nv, NULL::timestamptz AS last_ts
    FROM iv q
    UNION ALL
    SELECT variable_id, round(date_part('epoch', lt) * 1000)::bigint - round(date_part('epoch', ts) * 1000)::bigint, a0, inc0 + CASE WHEN pv IS NULL THEN 0 WHEN fv >= pv THEN fv - pv ELSE fv END, n, lt
    FROM sig
    WHERE inr
  ) u
  GROUP BY variable_id
) SELECT v.ord AS ord,
       v.public_id AS variable_id,
       v.label AS variable_label,
       v.name AS variable_name,
       v.created_at AS variable_created_at,
       v.device_public_id AS device_id,
       v.device_label,
       v.device_name,
       v.device_created_at,
       (coalesce(s.n, 0) > 0 OR coalesce(tw.cov, 0) > 0) AS has_data,
       coalesce(s.n, 0) AS n,
       s.mean_value,
       ieee_finite(area / nullif(cov, 0)) AS twa_value,
       ieee_finite(CASE WHEN cov > 0 THEN area / 1000 END) AS integral_value,
       coalesce(cov, 0)::float8 / 1000 AS coverage_value,
       ieee_finite(CASE WHEN nv > 0 THEN coalesce(inc, 0) END) AS increase_value FROM res v LEFT JOIN s ON s.variable_id = v.id LEFT JOIN tw ON tw.variable_id = v.id ORDER BY v.ord