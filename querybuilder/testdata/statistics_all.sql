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
pct_rows AS MATERIALIZED (
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.25, 0.5, 0.75]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 variables v JOIN devices d ON d.id = v.device_id
    WHERE v.account_id = ? AND v.public_id = r.variable_id
      AND (r.device_id = '' OR d.public_id = r.device_id)
      AND (r.device_label = '' OR d.label = r.device_label)
        ) k
        ORDER BY k.id
    ) ids
    JOIN "values" x ON x.variable_id = ids.id AND x.ts BETWEEN ? AND ?
    WHERE NOT EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
),
pct_packed AS MATERIALIZED (
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.25, 0.5, 0.75]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 variables v JOIN devices d ON d.id = v.device_id
    WHERE v.account_id = ? AND v.public_id = r.variable_id
      AND (r.device_id = '' OR d.public_id = r.device_id)
      AND (r.device_label = '' OR d.label = r.device_label)
        ) k
        ORDER BY k.id
    ) ids
    JOIN LATERAL (SELECT value FROM "values" WHERE variable_id = ids.id AND ts BETWEEN ? AND ?
        UNION ALL SELECT value FROM packed_dots(?, ?) WHERE variable_id = ids.id) x ON true
    WHERE EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
),
pct AS (
  SELECT DISTINCT ON (variable_id) * FROM (SELECT * FROM pct_rows UNION ALL SELECT * FROM pct_packed) parts
  ORDER BY variable_id
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
           first(x.first_value, x.first_ts) AS first_value,
           min(x.first_ts) AS first_ts,
           last(x.last_value, x.last_ts) AS last_value,
           max(x.last_ts) AS last_ts,
           min(x.min) AS min_value,
           first(x.min_ts, ROW(x.min, x.min_ts)) AS min_ts,
           max(x.max) AS max_value,
           first(x.max_ts, ROW(-x.max, x.max_ts)) AS max_ts,
           ieee_finite(sum(x.sum)) AS sum_value,
           finite_div(sum(x.sum), sum(x.n)) AS mean_value
    FROM pts x
    GROUP BY x.variable_id
),
sd AS (
    SELECT z.variable_id, CASE WHEN count(*) = count(z.m2)
        THEN (sum(z.m2) + sum(z.n * power(z.a - z.abar, 2))) / nullif(sum(z.n) - 1, 0) END AS var_value
    FROM (
        SELECT y.variable_id, y.n, y.m2, y.a, sum(y.n * y.a) OVER pv / sum(y.n) FILTER (WHERE y.m2 IS NOT NULL) OVER pv AS abar
        FROM (
            SELECT w.variable_id, w.n, w.m2,
                   CASE WHEN w.m2 IS NOT NULL THEN (w.min - min(w.min) FILTER (WHERE w.m2 IS NOT NULL) OVER (PARTITION BY w.variable_id)) + w.ks / w.n END AS a
            FROM (
    SELECT * FROM pts
            ) w
        ) y
        WINDOW pv AS (PARTITION BY y.variable_id)
    ) z
    GROUP BY z.variable_id
) SELECT v.ord AS ord,
       v.public_id AS variable_id,
       v.label AS variable_label,
       v.name AS variable_name,
       v.created_at AS variable_created_at,
       v.device_public_id AS device_id,
       v.device_label,
       v.device_name,
       v.device_created_at,
       coalesce(s.n, 0) > 0 AS has_data,
       coalesce(s.n, 0) AS n,
       s.first_value,
       s.first_ts,
       s.last_value,
       s.last_ts,
       s.min_value,
       s.min_ts,
       s.max_value,
       s.max_ts,
       s.sum_value,
       s.mean_value,
       sqrt(sd.var_value) AS std_value,
       p.pct[1] AS p25_value,
       p.pct[2] AS p50_value,
       p.pct[3] AS p75_value FROM res v LEFT JOIN s ON s.variable_id = v.id LEFT JOIN sd ON sd.variable_id = v.id LEFT JOIN pct p ON p.variable_id = v.id ORDER BY v.ord
