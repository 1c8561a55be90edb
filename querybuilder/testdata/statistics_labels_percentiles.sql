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
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.label = r.device_label AND v.label = r.variable_label
        ) k
        ORDER BY k.id
    ) ids
    JOIN "values" x ON x.variable_id = ids.id AND x.ts BETWEEN ? AND ?
    WHERE NOT EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
    UNION ALL
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.public_id = r.device_id AND v.label = r.variable_label
        ) k
        ORDER BY k.id
    ) ids
    JOIN "values" x ON x.variable_id = ids.id AND x.ts BETWEEN ? AND ?
    WHERE NOT EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
    UNION ALL
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
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
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.label = r.device_label AND v.label = r.variable_label
        ) k
        ORDER BY k.id
    ) ids
    JOIN LATERAL (SELECT value FROM "values" WHERE variable_id = ids.id AND ts BETWEEN ? AND ?
        UNION ALL SELECT value FROM packed_dots(?, ?) WHERE variable_id = ids.id) x ON true
    WHERE EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
    UNION ALL
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.public_id = r.device_id AND v.label = r.variable_label
        ) k
        ORDER BY k.id
    ) ids
    JOIN LATERAL (SELECT value FROM "values" WHERE variable_id = ids.id AND ts BETWEEN ? AND ?
        UNION ALL SELECT value FROM packed_dots(?, ?) WHERE variable_id = ids.id) x ON true
    WHERE EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)
    GROUP BY ids.id
    UNION ALL
    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[0.5]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
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
    SELECT x.variable_id, sum(x.n) AS n
    FROM pts x
    GROUP BY x.variable_id
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
       p.pct[1] AS p50_value FROM res v LEFT JOIN s ON s.variable_id = v.id LEFT JOIN pct p ON p.variable_id = v.id ORDER BY v.ord
