-- Synthetic variables (API.md §17, pkg/synthetic). variables.synthetic_expression keeps
-- the text as the user wrote it; this table keeps what the service computes from: the
-- expression parsed, its references resolved to variable keys (so relabelling a device
-- or variable does not change what a synthetic variable reads), and its inputs for the
-- dependency graph.
CREATE TABLE synthetic_variables (
    variable_id bigint PRIMARY KEY REFERENCES variables ON DELETE CASCADE,
    account_id  bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    -- the parsed expression (querybuilder.Expr as JSON)
    expression  jsonb NOT NULL,
    -- the variables it reads (raw or synthetic)
    inputs      bigint[] NOT NULL,
    -- series or window functions: a change before an input's first value, or
    -- retention, recomputes the whole history
    positional  boolean NOT NULL,
    -- the first timestamp of each window function's argument at the last computation:
    -- when one moves, so does the bucket grid (E8's origin), and everything is recomputed
    firsts      bigint[] NOT NULL DEFAULT '{}'
);
CREATE INDEX synthetic_variables_inputs_idx ON synthetic_variables USING gin (inputs);

--bun:split

-- The live upkeep's durable to-do: ranges of a synthetic variable's timestamps (ms,
-- inclusive) to recompute, inserted in the transaction that changed its inputs
-- (ingest.Follower Mark) and deleted in the transaction that recomputed them. Workers of
-- every instance take them with FOR UPDATE SKIP LOCKED. A failed recompute pushes
-- not_before back (attempts: exponential, at most 5 minutes apart).
CREATE TABLE synthetic_dirty (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    variable_id bigint NOT NULL,
    from_ts     bigint NOT NULL,
    to_ts       bigint NOT NULL,
    not_before  timestamptz NOT NULL DEFAULT now(),
    attempts    int NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX synthetic_dirty_variable_idx ON synthetic_dirty (variable_id, id);

--bun:split

-- Every instance keeps the graph in memory (which inputs have dependents): tell them
-- all when it changes.
CREATE FUNCTION synthetic_invalidate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sensorapi_invalidate', '{"k":"synthetic"}');
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER synthetic_variables_invalidate AFTER INSERT OR UPDATE OR DELETE ON synthetic_variables
    FOR EACH STATEMENT EXECUTE FUNCTION synthetic_invalidate();

--bun:split

-- A deleted input (alone or with its device) leaves its dependents with fewer values:
-- recompute them whole.
CREATE FUNCTION synthetic_input_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts)
    SELECT s.variable_id, 0, 253402300799999 FROM synthetic_variables s
    WHERE s.inputs @> ARRAY[OLD.id] AND s.variable_id <> OLD.id;
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER variables_synthetic_input_deleted AFTER DELETE ON variables
    FOR EACH ROW EXECUTE FUNCTION synthetic_input_deleted();

--bun:split

-- Retention drops old raw values of inputs and synthetic variables alike (whole chunks):
-- pointwise values go with their inputs, but a window's edge bucket, a running sum or a
-- shift now starts from other values: recompute those whole.
CREATE FUNCTION synthetic_after_retention() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO synthetic_dirty (variable_id, from_ts, to_ts)
    SELECT variable_id, 0, 253402300799999 FROM synthetic_variables WHERE positional;
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER retention_state_synthetic AFTER UPDATE OF raw_horizon ON retention_state
    FOR EACH ROW WHEN (NEW.raw_horizon IS DISTINCT FROM OLD.raw_horizon)
    EXECUTE FUNCTION synthetic_after_retention();
