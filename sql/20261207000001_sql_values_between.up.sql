-- A range of sensor.values that reads only the packed days it needs (issue 44,
-- docs/sql.md "Ranges over packed days"). A ts predicate on sensor.values cannot prune
-- packed days: a packed dot's ts is computed from its day's arrays, and PostgreSQL
-- derives no condition on values_packed.day from one on that expression (it infers
-- only equalities), so every packed day of the variable is unnested before the filter.
--
-- sensor.values_by_day is sensor.values with each value's UTC day: the packed row's day
-- on packed days, time_bucket('1 day', ts) on rows. A predicate on day reaches the
-- (variable_id, day) index and the chunks of values_packed; on rows TimescaleDB turns it
-- into a range on ts. sensor.values_between(from, to) is that view with both the day
-- and the ts range applied: a SQL function with the caller's rights (no SECURITY
-- DEFINER, no SET), which PostgreSQL inlines into the calling statement, so that the
-- view's owner, its row-level security (keyed by current_user, the role running the
-- query) and the caller's own predicates (variable_id, labels) apply exactly as on
-- sensor.values. The function reads nothing the role cannot read with SELECT.
CREATE VIEW sensor.values_by_day WITH (security_barrier) AS
SELECT v.public_id AS variable_id, d.label AS device_label, v.label AS variable_label,
       r.ts, r.value, r.context, time_bucket(INTERVAL '1 day', r.ts) AS day
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
JOIN public."values" r ON r.variable_id = v.id
UNION ALL
SELECT v.public_id, d.label, v.label,
       p.ts_base + ((u.i - 1) * p.ts_step + u.r) * INTERVAL '1 ms', u.value, p.context -> u.i::text, p.day
FROM public.variables v
JOIN public.devices d ON d.id = v.device_id
JOIN public.values_packed p ON p.variable_id = v.id
CROSS JOIN LATERAL unnest(p.ts_r, p.value) WITH ORDINALITY AS u(r, value, i);

--bun:split

ALTER VIEW sensor.values_by_day OWNER TO sensor_views;

--bun:split

GRANT SELECT ON sensor.values_by_day TO sensor_reader;

--bun:split

-- The bounds' check, raised once per statement: a pseudo-constant condition in the
-- inlined function (a one-time filter; folded at plan time when the bounds are
-- constants, as Grafana's $__timeFrom() and $__timeTo() are).
CREATE FUNCTION sensor.values_range_checked("from" timestamptz, "to" timestamptz)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF "from" IS NULL OR "to" IS NULL THEN
        RAISE EXCEPTION 'sensor.values_between: "from" and "to" must be timestamps, not NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF "from" > "to" THEN
        RAISE EXCEPTION 'sensor.values_between: "from" (%) is after "to" (%)', "from", "to"
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN true;
END $$;

--bun:split

-- Every value with from <= ts <= to (both included, as Grafana's $__timeFilter and
-- SQL's BETWEEN), the columns of sensor.values. Not STRICT and not VOLATILE: either
-- would keep PostgreSQL from inlining it. The coalesces keep a NULL bound from folding
-- the conditions to false at plan time, which would drop the check with them and
-- answer no rows instead of the error (the check refuses NULL before any row is read).
-- The upper bound on day is written day <= ANY (ARRAY[to]): as day <= to, PostgreSQL
-- would take the two bounds for a range on an expression without statistics
-- (time_bucket(ts) on rows), estimate the rows' share of it at 0.5%, and aggregate a
-- month of rows by sorting it, 1.6× the view's time; as an array comparison it is
-- estimated apart (the view's plan stays), and still bounds the index scan and the
-- chunks of values_packed.
CREATE FUNCTION sensor.values_between("from" timestamptz, "to" timestamptz)
RETURNS TABLE (variable_id text, device_label text, variable_label text, ts timestamptz,
               value double precision, context jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT b.variable_id, b.device_label, b.variable_label, b.ts, b.value, b.context
    FROM sensor.values_by_day b
    WHERE sensor.values_range_checked("from", "to")
      AND b.day >= time_bucket(INTERVAL '1 day', coalesce("from", '-infinity'))
      AND b.day <= ANY (ARRAY[coalesce("to", 'infinity')])
      AND b.ts >= coalesce("from", '-infinity') AND b.ts <= coalesce("to", 'infinity')
$$;

--bun:split

-- EXECUTE for the account roles' group only (functions are executable by PUBLIC by
-- default), and by default none on the functions created in schema sensor later.
REVOKE EXECUTE ON FUNCTION sensor.values_range_checked(timestamptz, timestamptz),
    sensor.values_between(timestamptz, timestamptz) FROM PUBLIC;

--bun:split

GRANT EXECUTE ON FUNCTION sensor.values_range_checked(timestamptz, timestamptz),
    sensor.values_between(timestamptz, timestamptz) TO sensor_reader;

--bun:split

ALTER DEFAULT PRIVILEGES IN SCHEMA sensor REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
