-- Room in every page of the coarse tiers for rewritten rows (fillfactor 70: 30% free).
-- A tile is rewritten by every write that lands in it: a quarter of a variable written
-- every 10 s 90 times, a day 8,640 times. With full pages each rewrite is a non-HOT
-- update (a new entry in the index, which bloats); with room on the page it is a HOT
-- update (no index entry, pruned in place). The minute tier stays packed: its tiles
-- are rewritten a few times within their minute and then never again, and it is 88%
-- of the tiers' size. Existing chunks keep their layout until rewritten; new chunks
-- take the setting.
ALTER TABLE value_quarters SET (fillfactor = 70);

--bun:split

ALTER TABLE value_days SET (fillfactor = 70);
