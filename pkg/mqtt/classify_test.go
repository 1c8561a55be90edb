package mqtt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/fault"
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
		{fault.Invalid("timestamp", "m"), "payload", packets.ErrPayloadFormatInvalid},
		{fault.ParseError("r"), "payload", packets.ErrPayloadFormatInvalid},
		{fault.Fields{"t": {"m"}}.Err(), "payload", packets.ErrPayloadFormatInvalid},
		{fmt.Errorf("write: %w", fault.DeviceDisabled), "disabled", packets.ErrNotAuthorized},
		{fault.NotFound("v"), "unavailable", packets.ErrServerUnavailable},
		{fault.QueueFull, "unavailable", packets.ErrServerUnavailable},
		{errors.New("conn closed"), "unavailable", packets.ErrServerUnavailable},
		{fmt.Errorf("write values: %w", &pgconn.PgError{Code: "53100"}), "unavailable", packets.ErrQuotaExceeded},
		{&pgconn.PgError{Code: "25006"}, "unavailable", packets.ErrServerUnavailable},
	} {
		if label, code := classify(c.err); label != c.label || code != c.code {
			t.Errorf("%v: %s %v, want %s %v", c.err, label, code, c.label, c.code)
		}
	}
}

// TestEveryKindRejected: every fault kind has its label and MQTT 5 reason in the one
// table; a new kind without an entry fails here.
func TestEveryKindRejected(t *testing.T) {
	for _, k := range fault.Kinds() {
		if r, ok := rejections[k]; !ok || r.label == "" || r.code.Code < 0x80 {
			t.Errorf("kind %v: rejection %+v (%v), want a label and an error reason", k, r, ok)
		}
	}
	if len(rejections) != len(fault.Kinds()) {
		t.Errorf("%d rejections for %d kinds", len(rejections), len(fault.Kinds()))
	}
}
