package mqtt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/pkg/apierr"
	"github.com/sensordata/sensorapi/pkg/auth"
)

// TestClassify: each error a publish meets gets its metric label and MQTT 5 reason
// (API.md §12); what is not the client's fault is "unavailable".
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err   error
		label string
		code  packets.Code
	}{
		{errTopic, "topic", packets.ErrNotAuthorized},
		{errScope, "scope", packets.ErrNotAuthorized},
		{fmt.Errorf("auth: %w", auth.ErrBadToken), "scope", packets.ErrNotAuthorized},
		{apierr.Invalid("timestamp", "m"), "payload", packets.ErrPayloadFormatInvalid},
		{apierr.ParseError("r"), "payload", packets.ErrPayloadFormatInvalid},
		{apierr.Fields{"t": {"m"}}.Err(), "payload", packets.ErrPayloadFormatInvalid},
		{fmt.Errorf("write: %w", apierr.DeviceDisabled), "disabled", packets.ErrNotAuthorized},
		{apierr.NotFound("v"), "unavailable", packets.ErrServerUnavailable},
		{apierr.QueueFull, "unavailable", packets.ErrServerUnavailable},
		{errors.New("conn closed"), "unavailable", packets.ErrServerUnavailable},
		{fmt.Errorf("write values: %w", &pgconn.PgError{Code: "53100"}), "unavailable", packets.ErrQuotaExceeded},
		{&pgconn.PgError{Code: "25006"}, "unavailable", packets.ErrServerUnavailable},
	} {
		if label, code := classify(c.err); label != c.label || code != c.code {
			t.Errorf("%v: %s %v, want %s %v", c.err, label, code, c.label, c.code)
		}
	}
}
