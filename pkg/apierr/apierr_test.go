package apierr

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestKindsKeepTheirStatuses: every error, one of each kind, answers the HTTP status
// API.md §2 gives it, from its kind.
func TestKindsKeepTheirStatuses(t *testing.T) {
	for _, c := range []struct {
		err    *Error
		status int
	}{
		{Invalid("f", "m"), 400},
		{ParseError("r"), 400},
		{NoCredentials, 401},
		{BadCredentials, 401},
		{Forbidden, 403},
		{NotFound("x"), 404},
		{MethodNotAllowed, 405},
		{TooLarge, 413},
		{UnsupportedMedia, 415},
		{DeviceDisabled, 423},
		{New(KindRateLimited, 429001, "Too many requests.", nil), 429},
		{ClientClosed, 499},
		{Internal("r"), 500},
		{Unavailable, 503},
		{QueryTimeout, 503},
		{QueueFull, 503},
	} {
		if c.err.Status() != c.status {
			t.Errorf("%d %s: kind %d's status %d, want %d", c.err.Code, c.err.Message, c.err.Kind, c.err.Status(), c.status)
		}
	}
}

// TestRetryAfterCopies: a header set on a shared error stays off the original.
func TestRetryAfterCopies(t *testing.T) {
	e := Unavailable.RetryAfter("9")
	if e.Header["Retry-After"] != "9" || Unavailable.Header["Retry-After"] != "5" {
		t.Fatalf("copy %v, original %v", e.Header, Unavailable.Header)
	}
}

// TestDatabaseFaultsByClass: faults of the database's environment are 503s naming
// their cause by SQLSTATE class, never 500s; other database errors are not faults.
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
		{&pgconn.PgError{Code: "23505"}, ""}, // a unique violation is a bug or a request's
		{&pgconn.PgError{Code: "57014"}, ""}, // a statement timeout has its own 503
		{&pgconn.PgError{Code: "40P01"}, ""}, // deadlocks are retried, not reported
		{errors.New("something else"), ""},
	} {
		ae := FromDatabase(c.err)
		switch {
		case c.cause == "" && ae != nil:
			t.Errorf("%v: %v, want no fault", c.err, ae)
		case c.cause != "" && (ae == nil || ae.Status() != 503 || ae.Detail != c.cause || ae.Header["Retry-After"] == ""):
			t.Errorf("%v: %+v, want 503 %q with Retry-After", c.err, ae, c.cause)
		}
	}
}

// TestDataExceptionsAreTheRequests: every data exception (SQLSTATE class 22) out of a
// write is a 400001 on "body"; no other database error is.
func TestDataExceptionsAreTheRequests(t *testing.T) {
	for _, code := range []string{"22P05", "22P02", "22003", "22001", "22021", "22007", "22000"} {
		ae := DataException(fmt.Errorf("write values: %w", &pgconn.PgError{Code: code}))
		if ae == nil || ae.Status() != 400 || ae.Code != 400001 || fmt.Sprint(ae.Detail) != fmt.Sprint(Fields{"body": {MsgDataRefused}}) {
			t.Errorf("%s: %+v, want 400001 on body", code, ae)
		}
	}
	for _, err := range []error{&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "53100"}, &pgconn.PgError{Code: "42P01"},
		errors.New("22P05"), nil} {
		if ae := DataException(err); ae != nil {
			t.Errorf("%v: %+v, want nil", err, ae)
		}
	}
}
