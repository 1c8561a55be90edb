-- rollups_until: how far a variable's rollup tiles (value_minutes, value_quarters,
-- value_days) are complete (issue 26). A write reads the marks of its variables under
-- the row locks it takes anyway and adds its rollups only to the tiles that end by them:
-- a fleet's fresh values cost their rows in "values" and nothing in the tiers. A job
-- (pkg/ingest rollupmark.go, every minute on every instance) builds the tiles past each
-- mark from the values (minutes) and the tier below (quarters, days), and moves the mark
-- to the current minute. Readers use tiles only before the smallest mark (the index),
-- raw values after it.
--
-- The default, a new variable's creation minute, is right: it has no values yet, so every
-- tile is complete. Existing rows take the migration's minute: the write path kept every
-- tier exact until now.
ALTER TABLE variables ADD COLUMN rollups_until timestamptz NOT NULL DEFAULT date_trunc('minute', now());

CREATE INDEX variables_rollups_until ON variables (rollups_until);
