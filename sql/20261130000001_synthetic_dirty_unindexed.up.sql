-- The to-do of the synthetic upkeep is inserted by every write of an input with
-- dependents and deleted by the step that recomputes it, always by id (take, postpone):
-- nothing reads it by variable, so its (variable_id, id) index was one more btree
-- insert per to-do row on the write path, and bloat, for no reader.
DROP INDEX IF EXISTS synthetic_dirty_variable_idx;
