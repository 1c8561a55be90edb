-- Events (API.md §18, docs/events.md): a condition on one variable, actions on trigger
-- and back to normal. The state machine's state lives in event_states: the
-- evaluator (pkg/events) reads it with its version (xmin), reads the variable's values
-- newer than last_ts in timestamp order, and commits the new state (only over the
-- version it read) together with the deliveries of every transition (rows here plus
-- their River jobs), so a transition's actions run once however many instances
-- evaluate. Data times are Unix ms.
CREATE TABLE events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id       text NOT NULL UNIQUE DEFAULT public_id(),
    account_id      bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    label           text NOT NULL,
    is_active       boolean NOT NULL DEFAULT true,
    -- the condition; deleting its variable deletes the event
    variable_id     bigint NOT NULL REFERENCES variables ON DELETE CASCADE,
    operator        text NOT NULL CHECK (operator IN ('>', '>=', '<', '<=', '==', '!=')),
    threshold       double precision NOT NULL,
    duration_ms     bigint NOT NULL DEFAULT 0 CHECK (duration_ms >= 0),
    actions         jsonb NOT NULL DEFAULT '[]',
    back_to_normal  jsonb NOT NULL DEFAULT '[]',
    -- the HMAC key of webhook signatures: kept in clear (it signs), shown once
    secret          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, label)
);
CREATE INDEX events_account_created_idx ON events (account_id, created_at DESC, id DESC);
CREATE INDEX events_variable_idx ON events (variable_id);

--bun:split

-- The state machine of each event, in a narrow row of its own: every evaluation
-- rewrites it (last_ts moves with every value), so it is kept small (WAL per
-- update) and with room for HOT updates, apart from the event's settings.
CREATE TABLE event_states (
    event_id    bigint PRIMARY KEY REFERENCES events ON DELETE CASCADE,
    state       text NOT NULL DEFAULT 'normal' CHECK (state IN ('normal', 'triggered')),
    run_since   bigint,          -- first value of the current run meeting the condition
    last_ts     bigint,          -- the newest value evaluated
    changed_at  timestamptz      -- when the state last changed
) WITH (fillfactor = 50);

--bun:split

-- One row per action of a transition; its River job (kind event_delivery) carries the
-- row's key. request holds the rendered action (url, method, headers, body; topic,
-- payload; variable, value), so every attempt sends the same bytes.
CREATE TABLE event_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id    text NOT NULL UNIQUE DEFAULT public_id(),
    event_id     bigint NOT NULL REFERENCES events ON DELETE CASCADE,
    action_index int NOT NULL,
    action_type  text NOT NULL,
    transition   text NOT NULL,
    request      jsonb NOT NULL,
    attempt      int NOT NULL DEFAULT 0,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
    http_status  int,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
CREATE INDEX event_deliveries_event_idx ON event_deliveries (event_id, created_at DESC, id DESC);
CREATE INDEX event_deliveries_pending_idx ON event_deliveries (created_at) WHERE status IN ('pending', 'retrying');

--bun:split

-- Every instance keeps the set of variables that have active events (pkg/events): an
-- event created, deleted, enabled, disabled or moved to another variable tells them
-- on the invalidation channel (pkg/cache), and each reloads the set.
CREATE FUNCTION events_invalidate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sensorapi_invalidate', '{"k":"event"}');
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER events_invalidate AFTER INSERT OR DELETE OR UPDATE OF variable_id, is_active ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_invalidate();
