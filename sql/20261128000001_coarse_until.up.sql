-- coarse_until: how far a variable's coarse rollup tiles (value_quarters, value_days) are
-- complete (issue 26). Writers add a batch's rollups to a coarse tile only when the tile
-- ends by it, under the variable's row lock they hold anyway; newer values go to the
-- minute tier alone, and a job (pkg/ingest coarse.go, every minute on every instance)
-- builds the quarters past it from the minutes, the days that end by the new mark from
-- the quarters, and moves it to the last quarter-hour. Readers use coarse tiles only
-- before the smallest mark (min of this column: the index), minutes and raw values after
-- it. A fleet's two-dot message then touches one tile per dot instead of three.
--
-- Quarter-aligned (quarters count from the epoch). The default, a new variable's creation
-- time, is right: it has no values yet, so every coarse tile is complete. Existing rows
-- take the migration's time: the write path kept every tier exact until now.
ALTER TABLE variables ADD COLUMN coarse_until timestamptz NOT NULL
    DEFAULT date_bin(INTERVAL '15 minutes', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00');

CREATE INDEX variables_coarse_until ON variables (coarse_until);
