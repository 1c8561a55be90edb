package apierr

import "testing"

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
