-- Last-value notifications (API.md §12): every time a variable's lastValue changes,
-- whichever instance, route or transaction wrote it, NOTIFY sensorapi_last_value tells
-- every instance, which delivers it to its MQTT subscribers. NOTIFY is sent only if the
-- transaction commits, and in commit order.
--
-- An older dot written late leaves last_value_ts and last_value as they were, so the
-- WHEN clause sends nothing for it: it is stored, not delivered.
--
-- Payload: {"a":<account>,"d":"<device label>","v":"<variable label>","value":<n>,
-- "ts":<ms>,"c":<context>}. NOTIFY payloads must stay under 8000 bytes; a context
-- that would pass that sends {"a":<account>,"id":<variable key>,"reread":true}
-- instead, and the instances read the value back.
CREATE FUNCTION sensorapi_last_value() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    msg text;
BEGIN
    SELECT jsonb_build_object('a', NEW.account_id, 'd', d.label, 'v', NEW.label, 'value', NEW.last_value,
            'ts', (extract(epoch FROM NEW.last_value_ts) * 1000)::bigint,
            'c', coalesce(NEW.last_value_context, '{}'::jsonb))::text
        INTO msg FROM devices d WHERE d.id = NEW.device_id;
    IF msg IS NULL OR octet_length(msg) > 7900 THEN
        msg := jsonb_build_object('a', NEW.account_id, 'id', NEW.id, 'reread', true)::text;
    END IF;
    PERFORM pg_notify('sensorapi_last_value', msg);
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER variables_last_value AFTER UPDATE OF last_value, last_value_ts, last_value_context ON variables
    FOR EACH ROW WHEN (NEW.last_value_ts IS NOT NULL AND (
        NEW.last_value_ts IS DISTINCT FROM OLD.last_value_ts OR
        NEW.last_value IS DISTINCT FROM OLD.last_value OR
        NEW.last_value_context IS DISTINCT FROM OLD.last_value_context))
    EXECUTE FUNCTION sensorapi_last_value();
