package fault

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestKindsAreNamed: every kind has a name for Error(); the renderers' tables are
// tested in pkg/apierr and pkg/mqtt over the same Kinds().
func TestKindsAreNamed(t *testing.T) {
	if len(Kinds()) != int(numKinds) || Kinds()[0] != KindInternal {
		t.Fatalf("Kinds() = %v", Kinds())
	}
	for _, k := range Kinds() {
		if k.String() == "" || k.String() == "unknown kind" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

// TestConstructors: each constructor lower packages use makes its kind and detail.
func TestConstructors(t *testing.T) {
	for _, c := range []struct {
		err    error
		kind   Kind
		detail string
	}{
		{Invalid("f", "m"), KindInvalid, "f: m"},
		{ParseError("r"), KindInvalid, "body: JSON parse error - r"},
		{Fields{"b": {"x", "y"}, "a": {"z"}}.Err(), KindInvalid, "a: z; b: x y"},
		{NotFound("Device 'x' was not found."), KindNotFound, "Device 'x' was not found."},
		{fmt.Errorf("write: %w", DeviceDisabled), KindDisabled, ""},
		{QueueFull, KindQueueFull, "The ingestion queue is full; retry later."},
		{StorageBudget, KindStorageFull, ""},
	} {
		var fe *Error
		if !errors.As(c.err, &fe) || fe.Kind != c.kind || detailString(fe.Detail) != c.detail {
			t.Errorf("%v: %+v, want kind %v detail %q", c.err, fe, c.kind, c.detail)
		}
	}
	if err := (Fields{}).Err(); err != nil {
		t.Errorf("no fields: %v, want nil", err)
	}
	if s := DeviceDisabled.Error(); s != "device is disabled" {
		t.Errorf("DeviceDisabled.Error() = %q", s)
	}
}

// TestDatabaseFaultsByClass: faults of the database's environment are unavailable
// errors naming their cause by SQLSTATE class; other database errors are not faults.
func TestDatabaseFaultsByClass(t *testing.T) {
	for _, c := range []struct {
		err   error
		cause string
	}{
		{&pgconn.PgError{Code: "53100"}, CauseDiskFull},
		{&pgconn.PgError{Code: "53200"}, CauseMemory},
		{&pgconn.PgError{Code: "53300"}, CauseConnections},
		{&pgconn.PgError{Code: "53400"}, CauseResources},
		{&pgconn.PgError{Code: "57P01"}, CauseRestarting},
		{&pgconn.PgError{Code: "57P03"}, CauseRestarting},
		{&pgconn.PgError{Code: "08006"}, CauseUnreachable},
		{&pgconn.PgError{Code: "25006"}, CauseReadOnly},
		{fmt.Errorf("write values: %w", io.ErrUnexpectedEOF), CauseUnreachable},
		{errors.New("failed to connect to `host=x`"), CauseUnreachable},
		{&pgconn.PgError{Code: "23505"}, ""}, // a unique violation is a bug or a request's
		{&pgconn.PgError{Code: "57014"}, ""}, // a statement timeout is its own kind
		{&pgconn.PgError{Code: "40P01"}, ""}, // deadlocks are retried, not reported
		{errors.New("something else"), ""},
		{nil, ""},
	} {
		fe := FromDatabase(c.err)
		switch {
		case c.cause == "" && fe != nil:
			t.Errorf("%v: %v, want no fault", c.err, fe)
		case c.cause != "" && (fe == nil || fe.Kind != KindUnavailable || fe.Detail != c.cause || !errors.Is(fe, c.err)):
			t.Errorf("%v: %+v, want unavailable %q wrapping it", c.err, fe, c.cause)
		}
	}
}

// TestDataExceptionsAreTheRequests: every data exception (SQLSTATE class 22) out of a
// write is invalid on "body"; no other database error is.
func TestDataExceptionsAreTheRequests(t *testing.T) {
	for _, code := range []string{"22P05", "22P02", "22003", "22001", "22021", "22007", "22000"} {
		fe := DataException(fmt.Errorf("write values: %w", &pgconn.PgError{Code: code}))
		if fe == nil || fe.Kind != KindInvalid || fmt.Sprint(fe.Detail) != fmt.Sprint(Fields{"body": {MsgDataRefused}}) {
			t.Errorf("%s: %+v, want invalid on body", code, fe)
		}
	}
	for _, err := range []error{&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "53100"}, &pgconn.PgError{Code: "42P01"},
		errors.New("22P05"), nil} {
		if fe := DataException(err); fe != nil {
			t.Errorf("%v: %+v, want nil", err, fe)
		}
	}
}

// TestTimeoutAndRange: a statement timeout and a deadline are timeouts; 22003 is out
// of range; neither is the other.
func TestTimeoutAndRange(t *testing.T) {
	if !IsTimeout(&pgconn.PgError{Code: "57014"}) || IsTimeout(&pgconn.PgError{Code: "22003"}) {
		t.Error("IsTimeout")
	}
	if !IsOutOfRange(fmt.Errorf("x: %w", &pgconn.PgError{Code: "22003"})) || IsOutOfRange(&pgconn.PgError{Code: "57014"}) {
		t.Error("IsOutOfRange")
	}
	if !strings.Contains(FromDatabase(&pgconn.PgError{Code: "53100"}).Error(), CauseDiskFull) {
		t.Error("FromDatabase's Error() names its cause")
	}
}
