package apierr

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// TestEveryKindRendered: every fault kind has its row in the one table, with a status
// and a body code of its own; a new kind without a row fails here.
func TestEveryKindRendered(t *testing.T) {
	codes := map[int]fault.Kind{}
	for _, k := range fault.Kinds() {
		r, ok := renderings[k]
		if !ok {
			t.Errorf("kind %v has no HTTP rendering", k)
			continue
		}
		if r.status < 400 || r.code/1000 != r.status || r.message == "" {
			t.Errorf("kind %v: %+v", k, r)
		}
		if other, dup := codes[r.code]; dup {
			t.Errorf("kinds %v and %v share body code %d", k, other, r.code)
		}
		codes[r.code] = k
	}
	if len(renderings) != len(fault.Kinds()) {
		t.Errorf("%d renderings for %d kinds", len(renderings), len(fault.Kinds()))
	}
}

// TestBodies: each error answers the status, body and Retry-After API.md §2 gives it.
func TestBodies(t *testing.T) {
	for _, c := range []struct {
		err    *Error
		status int
		body   string
		retry  string
	}{
		{Render(fault.Invalid("f", "m")), 400, `{"code":400001,"message":"Validation Error.","detail":{"f":["m"]}}`, ""},
		{Render(fault.ParseError("r")), 400, `{"code":400001,"message":"Validation Error.","detail":{"body":["JSON parse error - r"]}}`, ""},
		{Render(fault.New(fault.KindInvalid, "JSON parse error - r")), 400, `{"detail":"JSON parse error - r"}`, ""},
		{NoCredentials, 401, `{"code":401001,"message":"Authentication credentials were not provided.","detail":"Authentication credentials were not provided."}`, ""},
		{NoCredentials.DetailOnly(), 401, `{"detail":"Authentication credentials were not provided."}`, ""},
		{BadCredentials, 401, `{"code":401002,"message":"Incorrect authentication credentials.","detail":"Incorrect authentication credentials."}`, ""},
		{Forbidden, 403, `{"code":403001,"message":"You do not have permission to perform this action.","detail":"You do not have permission to perform this action."}`, ""},
		{Render(fault.NotFound("Device '~kitchen' was not found.")), 404, `{"code":404001,"message":"Not found.","detail":"Device '~kitchen' was not found."}`, ""},
		{MethodNotAllowed, 405, `{"code":405001,"message":"Method not allowed."}`, ""},
		{TooLarge, 413, `{"code":413001,"message":"Request body too large."}`, ""},
		{UnsupportedMedia, 415, `{"code":415001,"message":"Unsupported media type."}`, ""},
		{Render(fault.DeviceDisabled), 423, `{"code":423001,"message":"Device is disabled."}`, ""},
		{TooManyRequests("3"), 429, `{"code":429001,"message":"Too many requests.","detail":"Rate limit exceeded: retry after 3 s."}`, "3"},
		{ClientClosed, 499, `{"code":499001,"message":"Client closed request."}`, ""},
		{Internal("r1"), 500, `{"code":500001,"message":"Internal server error.","detail":"request id r1"}`, ""},
		{Unavailable, 503, `{"code":503001,"message":"Service unavailable."}`, "5"},
		{Render(fault.FromDatabase(&pgconn.PgError{Code: "53100"})), 503, `{"code":503001,"message":"Service unavailable.","detail":"The database is out of disk space."}`, "5"},
		{QueryTimeout, 503, `{"code":503002,"message":"Query timed out.","detail":"The query ran longer than the configured statement timeout."}`, "5"},
		{Render(fault.QueueFull), 503, `{"code":503003,"message":"Service unavailable.","detail":"The ingestion queue is full; retry later."}`, "1"},
		{Render(fault.StorageBudget), 507, `{"code":507001,"message":"Storage budget exhausted."}`, ""},
	} {
		b, err := json.Marshal(c.err.Body())
		if err != nil {
			t.Fatal(err)
		}
		if c.err.Status() != c.status || string(b) != c.body || c.err.Header["Retry-After"] != c.retry {
			t.Errorf("%v: %d %s Retry-After %q, want %d %s %q", c.err, c.err.Status(), b, c.err.Header["Retry-After"], c.status, c.body, c.retry)
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

// TestUnknownKindIsInternal: a kind outside the table renders as a 500, never as a 200.
func TestUnknownKindIsInternal(t *testing.T) {
	if e := Render(fault.New(fault.Kind(99), "x")); e.Status() != 500 || e.Code != 500001 {
		t.Fatal(fmt.Sprint(e.Status(), e.Code))
	}
}
