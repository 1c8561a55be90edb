-- Tile internals for the time-aware aggregations (issue 42, API.md §20): every tier's tile
-- keeps, besides its first and last dot, what the signal between its own dots adds up to,
-- so that a read can take a whole tile for its inside and compute only the intervals
-- between tiles (and at the range's edges) itself:
--   area_locf    Σ vᵢ·(tᵢ₊₁ − tᵢ) over consecutive dots of the tile (value·ms), each value held
--   area_linear  Σ (vᵢ + vᵢ₊₁)/2·(tᵢ₊₁ − tᵢ), the trapezoids of the straight lines
--   increase     Σ of each dot's contribution to a counter's increase after the tile's first
--                (vᵢ₊₁ − vᵢ, or vᵢ₊₁ after a restart: vᵢ₊₁ < vᵢ)
--   longest_ms   the longest interval between consecutive dots (0 for a single dot): a read
--                with max_gap uses the tile only when it is within max_gap
-- All four are NULL together when the tile holds a value beyond ±1e150 or a nonzero one
-- below 1e-100 (the spread's limits: then the arithmetic could overflow), or when a write
-- interleaved new dots with stored ones and could not add them up (the write path then
-- recomputes the tile at once): a read takes such a tile's raw dots instead. The write
-- path and the rebuilds keep them (pkg/values tiers.go: rawTileSQL, mergeTileSQL,
-- addTilesSQL, where a parent adds the interval between consecutive children).
--
-- Existing tiles get them from the raw values of both layouts, tile by tile: a frozen copy
-- of rawTileSQL's arithmetic (this runs against the schema of its date).
ALTER TABLE value_minutes
    ADD COLUMN area_locf double precision, ADD COLUMN area_linear double precision,
    ADD COLUMN increase double precision, ADD COLUMN longest_ms bigint;

--bun:split

ALTER TABLE value_quarters
    ADD COLUMN area_locf double precision, ADD COLUMN area_linear double precision,
    ADD COLUMN increase double precision, ADD COLUMN longest_ms bigint;

--bun:split

ALTER TABLE value_days
    ADD COLUMN area_locf double precision, ADD COLUMN area_linear double precision,
    ADD COLUMN increase double precision, ADD COLUMN longest_ms bigint;

--bun:split

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('value_minutes', 60), ('value_quarters', 900), ('value_days', 86400)) AS x(tbl, secs) LOOP
        EXECUTE format($f$
UPDATE %1$I m
SET area_locf = s.area_locf, area_linear = s.area_linear, increase = s.increase, longest_ms = s.longest_ms
FROM (
    SELECT variable_id, tile,
           CASE WHEN bool_and(ok) THEN coalesce(sum(pv * dt) FILTER (WHERE ok AND pok), 0) END AS area_locf,
           CASE WHEN bool_and(ok) THEN coalesce(sum((pv + value) * dt / 2) FILTER (WHERE ok AND pok), 0) END AS area_linear,
           CASE WHEN bool_and(ok) THEN coalesce(sum(CASE WHEN value >= pv THEN value - pv ELSE value END)
                                                FILTER (WHERE ok AND pok), 0) END AS increase,
           CASE WHEN bool_and(ok) THEN coalesce(max(dt), 0) END AS longest_ms
    FROM (SELECT y.*, (y.value = 0 OR abs(y.value) BETWEEN 1e-100 AND 1e150) AS ok,
                 (y.pv = 0 OR abs(y.pv) BETWEEN 1e-100 AND 1e150) AS pok,
                 round(date_part('epoch', y.ts) * 1000)::bigint - round(date_part('epoch', y.pt) * 1000)::bigint AS dt
          FROM (SELECT d.variable_id, time_bucket(make_interval(secs => %2$s), d.ts) AS tile, d.ts, d.value,
                       lag(d.ts) OVER w AS pt, lag(d.value) OVER w AS pv
                FROM (SELECT variable_id, ts, value FROM "values"
                      UNION ALL
                      SELECT variable_id, ts, value FROM packed_dots('1970-01-01 00:00:00+00', 'infinity')) d
                WINDOW w AS (PARTITION BY d.variable_id, time_bucket(make_interval(secs => %2$s), d.ts) ORDER BY d.ts)) y) z
    GROUP BY variable_id, tile
) s
WHERE m.variable_id = s.variable_id AND m.tile = s.tile$f$, t.tbl, t.secs);
    END LOOP;
END
$$;
