-- Token scopes (API.md §13). Account tokens are `full` (everything in the account) or
-- `read` (GETs and the analytics POSTs); device tokens are bound to one device and
-- deleted with it (ON DELETE CASCADE fires tokens_invalidate, so every instance drops
-- them from its cache and closes their MQTT connections). Which route each scope may
-- use is a table in the code (pkg/auth/scopes.go), not data.
ALTER TABLE tokens
    ADD COLUMN public_id text NOT NULL UNIQUE DEFAULT public_id(),
    ADD COLUMN scope     text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'read', 'device')),
    ADD COLUMN device_id bigint REFERENCES devices ON DELETE CASCADE,
    ADD CONSTRAINT tokens_device_scope CHECK ((scope = 'device') = (device_id IS NOT NULL));

--bun:split

CREATE INDEX tokens_account_idx ON tokens (account_id, created_at DESC, id DESC);
CREATE INDEX tokens_device_idx ON tokens (device_id) WHERE device_id IS NOT NULL;
