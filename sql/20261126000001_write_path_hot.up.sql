-- The small-message write path (issue 26), measured with pg_stat_statements under
-- make bench-fleet: per 2-dot message the database spent most of its time on the
-- devices row and the last-value trigger, not on the values.
--
-- 1. devices.last_activity was indexed (devices_account_activity_idx, for
--    sort_by=lastActivity), so every write's lastActivity update was a non-HOT update:
--    a new entry in each of the table's 11 indexes, three of them GIN (trigram search,
--    tags). 125,000 updates left 39,000 dead rows and 24 MB for 3,000 devices; the lock
--    and the update took 1.4 ms a batch. Without the index the update is HOT (no index
--    entry), given room on the page (fillfactor 70). The device list sorted by
--    lastActivity now sorts the account's devices (docs/operations.md).
DROP INDEX devices_account_activity_idx;

--bun:split

ALTER TABLE devices SET (fillfactor = 70);

--bun:split

-- 2. Last-value notifications move out of the writing transaction: PostgreSQL holds
--    its notification queue lock from a notifying transaction's pre-commit through its
--    WAL flush, so writers that notify commit one after the other. The writer now sends
--    them after its commit, in a transaction of its own (pkg/ingest, notifyLastValues),
--    with the same payload this trigger built.
DROP TRIGGER variables_last_value ON variables;

--bun:split

DROP FUNCTION sensorapi_last_value();
