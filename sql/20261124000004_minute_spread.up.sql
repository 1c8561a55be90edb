-- The spread of each minute, so that std (and variance) can be answered from the
-- rollups exactly and in a numerically stable way (Chan et al.'s parallel formula):
--   ks: the sum of (value - min) over the minute's values, the shifted sum;
--   m2: the sum of squared deviations from the minute's mean.
-- Shifting by the minute's own min keeps the numbers small where values are large
-- and close together (1e6 ± 0.01): a plain sum of squares would lose every digit
-- that matters there. The write path merges them (pkg/ingest/tiers.go). A minute
-- holding a value beyond ±1e150, whose square would overflow, has none (NULL).
ALTER TABLE value_minutes ADD COLUMN ks double precision, ADD COLUMN m2 double precision;

--bun:split

UPDATE value_minutes m SET ks = s.ks, m2 = s.m2
FROM (
    SELECT x.variable_id, time_bucket(INTERVAL '1 minute', x.ts) AS minute,
           sum(x.value - mm.min) AS ks, var_pop(x.value - mm.min) * count(*) AS m2
    FROM "values" x
    JOIN value_minutes mm ON mm.variable_id = x.variable_id AND mm.minute = time_bucket(INTERVAL '1 minute', x.ts)
    WHERE greatest(abs(mm.min), abs(mm.max)) <= 1e150
    GROUP BY 1, 2
) s
WHERE m.variable_id = s.variable_id AND m.minute = s.minute;
