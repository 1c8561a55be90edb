-- Indexes for the Device and Variable lists (store.ParseList orders "col DESC NULLS
-- LAST, id DESC"; an index must match the NULLS order to serve page 1 without a sort).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

--bun:split

-- Replaces devices_account_created_idx, whose DESC (NULLS FIRST) order the lists never use.
CREATE INDEX devices_account_created_nl_idx ON devices (account_id, created_at DESC NULLS LAST, id DESC);
DROP INDEX devices_account_created_idx;
-- sort_by=label|name: "ASC NULLS FIRST, id ASC" (DESC NULLS LAST scans it backwards)
CREATE INDEX devices_account_label_idx ON devices (account_id, label NULLS FIRST, id);
CREATE INDEX devices_account_name_idx ON devices (account_id, name NULLS FIRST, id);
CREATE INDEX devices_account_activity_idx ON devices (account_id, last_activity DESC NULLS LAST, id DESC);

--bun:split

-- search=text is label ILIKE '%text%' OR name ILIKE '%text%'.
CREATE INDEX devices_label_trgm_idx ON devices USING gin (label gin_trgm_ops);
CREATE INDEX devices_name_trgm_idx ON devices USING gin (name gin_trgm_ops);

--bun:split

CREATE INDEX variables_account_created_nl_idx ON variables (account_id, created_at DESC NULLS LAST, id DESC);
DROP INDEX variables_account_created_idx;
CREATE INDEX variables_device_created_idx ON variables (device_id, created_at DESC NULLS LAST, id DESC);
CREATE INDEX variables_account_label_idx ON variables (account_id, label NULLS FIRST, id);
