-- Cross-instance cache invalidation (pkg/notify, pkg/cache). Every `serve` process keeps
-- tokens, devices and variables in memory; these triggers tell all of them, through
-- NOTIFY on the channel sensorapi_invalidate, when an entry they may hold stops being
-- true. A trigger sees every writer (the API, the CLI, an operator in psql), and NOTIFY
-- is delivered only if the transaction commits. Inserts need no message: caches never
-- remember that something is missing.
--
-- Payloads are small JSON objects naming the cache key that went stale:
--   {"k":"token","h":"<sha256 hex>"}          a token revoked, changed or deleted
--   {"k":"account","a":<id>}                  an account's settings changed
--   {"k":"device","a":<account>,"l":"<label>"} a device deleted, relabelled, disabled
--   {"k":"variable","d":<device>,"l":"<label>"} a variable deleted or relabelled
CREATE FUNCTION sensorapi_invalidate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    msg jsonb;
BEGIN
    CASE TG_TABLE_NAME
    WHEN 'tokens' THEN
        msg := jsonb_build_object('k', 'token', 'h', encode(OLD.hash, 'hex'));
    WHEN 'accounts' THEN
        msg := jsonb_build_object('k', 'account', 'a', OLD.id);
    WHEN 'devices' THEN
        msg := jsonb_build_object('k', 'device', 'a', OLD.account_id, 'l', OLD.label);
    WHEN 'variables' THEN
        msg := jsonb_build_object('k', 'variable', 'd', OLD.device_id, 'l', OLD.label);
    END CASE;
    PERFORM pg_notify('sensorapi_invalidate', msg::text);
    RETURN NULL;
END $$;

--bun:split

-- Only the columns a cache holds: lastActivity and lastValue updates (every write)
-- send nothing.
CREATE TRIGGER tokens_invalidate AFTER UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION sensorapi_invalidate();
CREATE TRIGGER accounts_invalidate AFTER UPDATE OF name, decimal_places OR DELETE ON accounts
    FOR EACH ROW EXECUTE FUNCTION sensorapi_invalidate();
CREATE TRIGGER devices_invalidate AFTER UPDATE OF label, is_active, account_id OR DELETE ON devices
    FOR EACH ROW EXECUTE FUNCTION sensorapi_invalidate();
CREATE TRIGGER variables_invalidate AFTER UPDATE OF label, device_id OR DELETE ON variables
    FOR EACH ROW EXECUTE FUNCTION sensorapi_invalidate();
