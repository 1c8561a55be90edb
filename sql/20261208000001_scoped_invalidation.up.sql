-- The variables' and the events' invalidation messages name their account (pkg/events):
-- each instance's event evaluators keep an entry per event (its settings, labels and
-- state), and a change drops only the entries of the account it belongs to, instead of
-- every account's (each would then be evaluated from the database on its next write).
--   {"k":"variable","a":<account>,"d":<device>,"l":"<label>"}
--   {"k":"event","a":<account>}   an event created, deleted, enabled, disabled or moved
CREATE OR REPLACE FUNCTION sensorapi_invalidate() RETURNS trigger LANGUAGE plpgsql AS $$
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
        msg := jsonb_build_object('k', 'variable', 'a', OLD.account_id, 'd', OLD.device_id, 'l', OLD.label);
    END CASE;
    PERFORM pg_notify('sensorapi_invalidate', msg::text);
    RETURN NULL;
END $$;

--bun:split

-- A row trigger now (it names the row's account); PostgreSQL delivers identical
-- payloads of one transaction once, so a statement over many events of an account
-- still sends one message.
CREATE OR REPLACE FUNCTION events_invalidate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sensorapi_invalidate', jsonb_build_object('k', 'event',
        'a', CASE TG_OP WHEN 'DELETE' THEN OLD.account_id ELSE NEW.account_id END)::text);
    RETURN NULL;
END $$;

--bun:split

DROP TRIGGER events_invalidate ON events;

--bun:split

CREATE TRIGGER events_invalidate AFTER INSERT OR DELETE OR UPDATE OF variable_id, is_active ON events
    FOR EACH ROW EXECUTE FUNCTION events_invalidate();
