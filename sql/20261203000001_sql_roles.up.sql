-- SQL for operators (API.md §22, docs/sql.md, pkg/sqlrole): a read-only PostgreSQL login
-- role per account that sees the schema `sensor` alone, whose views are the stable
-- surface over the internal layout, and only its own account's rows in them. The
-- database keeps accounts apart, not the views' text:
--
--   sensor_views   NOLOGIN, owns the views and holds SELECT on the base tables they read.
--                  PostgreSQL checks a view's base tables, and picks their row-level
--                  security policies, as the view's owner: the restrictive policies
--                  below apply to sensor_views alone, and key the rows by current_user
--                  (inside a view, still the role that runs the query) through the
--                  mapping sensor_admin.sql_roles.
--   sensor_reader  NOLOGIN, holds USAGE on schema sensor and SELECT on its views; every
--                  account's role is a member of it (and of nothing else).
--   sensor_admin.sql_roles   role name → account, readable by sensor_views and the
--                  service only (sensorapi sql-role create|list|drop keeps it).
--
-- Every base table a view reads has row-level security enabled and forced (the tables'
-- owner is subject to it too); a permissive policy for everyone (USING true) keeps the
-- service's own access exactly as before, whether it connects as the owner, as another
-- role or as a superuser (which bypasses row-level security anyway). Roles are
-- cluster-wide: the statements creating them tolerate another database of the same
-- server (or a DBA, for a migrating role without CREATEROLE) having created them first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sensor_views') THEN
        CREATE ROLE sensor_views NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

--bun:split

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sensor_reader') THEN
        CREATE ROLE sensor_reader NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

--bun:split

-- A migrating role that is not a superuser must be able to hand the views to
-- sensor_views (ALTER ... OWNER needs SET on the new owner) without inheriting its
-- privileges or its policies (INHERIT FALSE: the restrictive policies below would
-- otherwise apply to the service's own queries).
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT sensor_views TO %I WITH INHERIT FALSE, SET TRUE', current_user);
    END IF;
END $$;

--bun:split

CREATE SCHEMA sensor_admin;

--bun:split

CREATE TABLE sensor_admin.sql_roles (
    role_name         name PRIMARY KEY,
    account_id        bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    statement_timeout interval NOT NULL,
    connection_limit  int NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

--bun:split

GRANT USAGE ON SCHEMA sensor_admin TO sensor_views;

--bun:split

GRANT SELECT ON sensor_admin.sql_roles TO sensor_views;

--bun:split

CREATE SCHEMA sensor;

--bun:split

-- ALTER VIEW ... OWNER TO needs the new owner to hold CREATE on the schema.
GRANT USAGE, CREATE ON SCHEMA sensor TO sensor_views;

--bun:split

GRANT USAGE ON SCHEMA sensor TO sensor_reader;

--bun:split

-- Ids are the API's public ids (24 hex characters), never the internal keys.
CREATE VIEW sensor.devices WITH (security_barrier) AS
SELECT d.public_id AS id, d.label, d.name, d.description, d.tags, d.properties, d.created_at
FROM public.devices d;

--bun:split

CREATE VIEW sensor.variables WITH (security_barrier) AS
SELECT v.public_id AS id, d.public_id AS device_id, d.label AS device_label, v.label, v.name,
       v.unit, v.type, v.synthetic_expression, v.last_value, v.last_value_ts AS last_timestamp
FROM public.variables v JOIN public.devices d ON d.id = v.device_id;

--bun:split

-- Every value, whichever layout holds its day: rows of "values", or a packed day's
-- arrays unnested (the timestamps rebuilt as packed_dots rebuilds them,
-- sql/20261127300001_packed_slices.up.sql). A day is in one layout at a time, so the
-- union needs no deduplication. Each branch joins the variables itself, so that a
-- predicate on the variable reaches both tables' (variable_id, …) indexes and a
-- predicate on ts the index and chunks of "values" (docs/sql.md, "Speed"). The packed
-- branch is written out rather than calling packed_dots: functions in a view run with
-- the privileges of the querying role, which may not read values_packed.
CREATE VIEW sensor.values WITH (security_barrier) AS
SELECT v.public_id AS variable_id, d.label AS device_label, v.label AS variable_label,
       r.ts, r.value, r.context
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
JOIN public."values" r ON r.variable_id = v.id
UNION ALL
SELECT v.public_id, d.label, v.label,
       p.ts_base + ((u.i - 1) * p.ts_step + u.r) * INTERVAL '1 ms', u.value, p.context -> u.i::text
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
JOIN public.values_packed p ON p.variable_id = v.id
CROSS JOIN LATERAL unnest(p.ts_r, p.value) WITH ORDINALITY AS u(r, value, i);

--bun:split

-- The rollup tiers, per variable and UTC-aligned bucket. Tiles are complete for every
-- tile that ends by the variable's rollups_until (sql/20261128000001_rollups_until.up.sql):
-- before the bucket holding the mark they are read as kept; from it on the buckets are
-- computed from the raw rows ("values": the packer packs only days that end by the
-- mark). Packed days have no minute tiles: values_1m rolls their dots up per minute.
-- first and last are the bucket's first and last value by timestamp.
CREATE VIEW sensor.values_1m WITH (security_barrier) AS
SELECT v.public_id AS variable_id, d.label AS device_label, v.label AS variable_label,
       t.bucket, t.count, t.sum, t.min, t.max, t.sum / t.count AS mean, t.first, t.last
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
CROSS JOIN LATERAL (
    SELECT m.tile AS bucket, m.n::bigint AS count, m.sum, m.min, m.max,
           m.first_value AS first, m.last_value AS last
    FROM public.value_minutes m
    WHERE m.variable_id = v.id AND m.tile < v.rollups_until
    UNION ALL
    SELECT time_bucket(INTERVAL '1 minute', r.ts), count(*), sum(r.value), min(r.value), max(r.value),
           first(r.value, r.ts), last(r.value, r.ts)
    FROM public."values" r
    WHERE r.variable_id = v.id AND r.ts >= v.rollups_until
    GROUP BY 1
    UNION ALL
    SELECT time_bucket(INTERVAL '1 minute', k.ts), count(*), sum(k.value), min(k.value), max(k.value),
           first(k.value, k.ts), last(k.value, k.ts)
    FROM (SELECT p.ts_base + ((u.i - 1) * p.ts_step + u.r) * INTERVAL '1 ms' AS ts, u.value
          FROM public.values_packed p
          CROSS JOIN LATERAL unnest(p.ts_r, p.value) WITH ORDINALITY AS u(r, value, i)
          WHERE p.variable_id = v.id) k
    GROUP BY 1
) t;

--bun:split

CREATE VIEW sensor.values_15m WITH (security_barrier) AS
SELECT v.public_id AS variable_id, d.label AS device_label, v.label AS variable_label,
       t.bucket, t.count, t.sum, t.min, t.max, t.sum / t.count AS mean, t.first, t.last
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
CROSS JOIN LATERAL (
    SELECT q.tile AS bucket, q.n::bigint AS count, q.sum, q.min, q.max,
           q.first_value AS first, q.last_value AS last
    FROM public.value_quarters q
    WHERE q.variable_id = v.id AND q.tile < time_bucket(INTERVAL '15 minutes', v.rollups_until)
    UNION ALL
    SELECT time_bucket(INTERVAL '15 minutes', r.ts), count(*), sum(r.value), min(r.value), max(r.value),
           first(r.value, r.ts), last(r.value, r.ts)
    FROM public."values" r
    WHERE r.variable_id = v.id AND r.ts >= time_bucket(INTERVAL '15 minutes', v.rollups_until)
    GROUP BY 1
) t;

--bun:split

CREATE VIEW sensor.values_1d WITH (security_barrier) AS
SELECT v.public_id AS variable_id, d.label AS device_label, v.label AS variable_label,
       t.bucket, t.count, t.sum, t.min, t.max, t.sum / t.count AS mean, t.first, t.last
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
CROSS JOIN LATERAL (
    SELECT y.tile AS bucket, y.n::bigint AS count, y.sum, y.min, y.max,
           y.first_value AS first, y.last_value AS last
    FROM public.value_days y
    WHERE y.variable_id = v.id AND y.tile < time_bucket(INTERVAL '1 day', v.rollups_until)
    UNION ALL
    SELECT time_bucket(INTERVAL '1 day', r.ts), count(*), sum(r.value), min(r.value), max(r.value),
           first(r.value, r.ts), last(r.value, r.ts)
    FROM public."values" r
    WHERE r.variable_id = v.id AND r.ts >= time_bucket(INTERVAL '1 day', v.rollups_until)
    GROUP BY 1
) t;

--bun:split

ALTER VIEW sensor.devices OWNER TO sensor_views;

--bun:split

ALTER VIEW sensor.variables OWNER TO sensor_views;

--bun:split

ALTER VIEW sensor.values OWNER TO sensor_views;

--bun:split

ALTER VIEW sensor.values_1m OWNER TO sensor_views;

--bun:split

ALTER VIEW sensor.values_15m OWNER TO sensor_views;

--bun:split

ALTER VIEW sensor.values_1d OWNER TO sensor_views;

--bun:split

GRANT SELECT ON sensor.devices, sensor.variables, sensor.values, sensor.values_1m,
    sensor.values_15m, sensor.values_1d TO sensor_reader;

--bun:split

GRANT SELECT ON public.devices, public.variables, public."values", public.values_packed,
    public.value_minutes, public.value_quarters, public.value_days TO sensor_views;

--bun:split

-- Row-level security on every base table the views read: enabled, forced for the owner,
-- everything for everyone (the service) but sensor_views, which sees the account of
-- the role running the query (none when that role is not in the mapping).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['devices', 'variables', 'values', 'values_packed',
                             'value_minutes', 'value_quarters', 'value_days'] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY service ON public.%I USING (true) WITH CHECK (true)', t);
    END LOOP;
END $$;

--bun:split

CREATE POLICY sensor_account ON public.devices AS RESTRICTIVE FOR SELECT TO sensor_views
    USING (account_id = (SELECT r.account_id FROM sensor_admin.sql_roles r WHERE r.role_name = current_user));

--bun:split

CREATE POLICY sensor_account ON public.variables AS RESTRICTIVE FOR SELECT TO sensor_views
    USING (account_id = (SELECT r.account_id FROM sensor_admin.sql_roles r WHERE r.role_name = current_user));

--bun:split

-- The value tables key their rows by variable: the account's variables (the subquery
-- sees them through the policy on variables above), as one hashed set per statement.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['values', 'values_packed', 'value_minutes', 'value_quarters', 'value_days'] LOOP
        EXECUTE format('CREATE POLICY sensor_account ON public.%I AS RESTRICTIVE FOR SELECT TO sensor_views
            USING (variable_id IN (SELECT v.id FROM public.variables v))', t);
    END LOOP;
END $$;

--bun:split

-- No temporary tables for the roles (they are members of PUBLIC): TEMP goes back to the
-- migrating role alone, which owns the schema (the service creates none today).
DO $$
BEGIN
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), current_user);
END $$;

--bun:split

-- The service's own functions (public_id, packed_*, ieee_*, the trigger functions …)
-- are not for the roles: EXECUTE from PUBLIC is revoked on every function of schema
-- public that no extension owns (TimescaleDB's time_bucket, first, last stay callable),
-- and on those the migrating role creates there later. Their owner keeps EXECUTE.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass
                          AND e.objid = p.oid AND e.deptype = 'e')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC', f);
    END LOOP;
END $$;

--bun:split

ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
