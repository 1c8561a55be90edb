// Package apierr renders errors for HTTP (API.md §2): one table from a fault kind
// (pkg/fault: what went wrong, for any protocol) to the status, body code, message and
// Retry-After it answers, and the errors only HTTP has (no credentials, a wrong method,
// a body too large or not JSON, a spent request budget, a client that left, a bug's
// request id). Handlers return errors; pkg/api renders them here, in one place, and no
// handler writes error JSON.
package apierr

import (
	"net/http"

	"github.com/sensordata/sensorapi/pkg/fault"
)

// rendering is how HTTP answers a kind of fault.
type rendering struct {
	status     int
	code       int    // body "code"
	message    string // body "message"
	retryAfter string // Retry-After in seconds; "" sends none
}

// renderings is the one table from fault kind to HTTP answer; every kind has its row
// (TestEveryKindRendered). The body's detail is the fault's.
var renderings = map[fault.Kind]rendering{
	fault.KindInternal:        {http.StatusInternalServerError, 500001, "Internal server error.", ""},
	fault.KindInvalid:         {http.StatusBadRequest, 400001, "Validation Error.", ""},
	fault.KindUnauthenticated: {http.StatusUnauthorized, 401002, "Incorrect authentication credentials.", ""},
	fault.KindForbidden:       {http.StatusForbidden, 403001, "You do not have permission to perform this action.", ""},
	fault.KindNotFound:        {http.StatusNotFound, 404001, "Not found.", ""},
	fault.KindDisabled:        {http.StatusLocked, 423001, "Device is disabled.", ""},
	fault.KindUnavailable:     {http.StatusServiceUnavailable, 503001, "Service unavailable.", "5"},
	fault.KindQueryTimeout:    {http.StatusServiceUnavailable, 503002, "Query timed out.", "5"},
	fault.KindQueueFull:       {http.StatusServiceUnavailable, 503003, "Service unavailable.", "1"},
	fault.KindStorageFull:     {http.StatusInsufficientStorage, 507001, "Storage budget exhausted.", ""},
	fault.KindTooLarge:        {http.StatusRequestEntityTooLarge, 413001, "Request body too large.", ""},
}

// Error is an HTTP error answer: its status, body and headers.
type Error struct {
	status  int
	Code    int    // body "code"; 0 renders no code/message (the detail-only bodies)
	Message string // body "message"
	Detail  any    // body "detail": a string or a fault.Fields map; nil omits it
	Header  map[string]string
}

// Render is the HTTP answer to a fault, from its kind's row. An invalid fault whose
// detail is a sentence rather than fields renders as {"detail": sentence} alone, as
// DRF renders a parse error (E8/E9's JSON parse errors, spec). A kind without a row
// (a bug TestEveryKindRendered catches) renders as the internal error's.
func Render(f *fault.Error) *Error {
	r, ok := renderings[f.Kind]
	if !ok {
		r = renderings[fault.KindInternal]
	}
	e := &Error{status: r.status, Code: r.code, Message: r.message, Detail: f.Detail}
	if r.retryAfter != "" {
		e.Header = map[string]string{"Retry-After": r.retryAfter}
	}
	if _, sentence := f.Detail.(string); sentence && f.Kind == fault.KindInvalid {
		return e.DetailOnly()
	}
	return e
}

// Status is the HTTP status of the answer.
func (e *Error) Status() int { return e.status }

// RetryAfter returns a copy that tells the client to retry after secs seconds.
func (e *Error) RetryAfter(secs string) *Error {
	c := *e
	c.Header = map[string]string{"Retry-After": secs}
	return &c
}

func (e *Error) Error() string {
	if d, ok := e.Detail.(string); ok && d != e.Message {
		return e.Message + " " + d
	}
	return e.Message
}

// Body is the JSON body of the error, fields in the order API.md shows them.
func (e *Error) Body() any {
	return struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
		Detail  any    `json:"detail,omitempty"`
	}{e.Code, e.messageIfCoded(), e.Detail}
}

func (e *Error) messageIfCoded() string {
	if e.Code == 0 {
		return ""
	}
	return e.Message
}

// DetailOnly returns a copy rendered as {"detail": ...} alone, as the statistics
// endpoint answers 401s and E8/E9 answer JSON parse errors (spec).
func (e *Error) DetailOnly() *Error {
	c := *e
	if c.Detail == nil {
		c.Detail = c.Message
	}
	c.Code = 0
	return &c
}

// Internal is 500001; the detail names only the request id, never the cause.
func Internal(requestID string) *Error {
	return Render(fault.New(fault.KindInternal, "request id "+requestID))
}

// TooManyRequests is 429001: the token's request budget is spent for secs seconds.
func TooManyRequests(secs string) *Error {
	return httpOnly(http.StatusTooManyRequests, 429001, "Too many requests.",
		"Rate limit exceeded: retry after "+secs+" s.").RetryAfter(secs)
}

// The faults pkg/api answers itself, rendered.
var (
	BadCredentials = Render(fault.Unauthenticated)
	Forbidden      = Render(fault.Forbidden)
	Unavailable    = Render(fault.Unavailable)
	QueryTimeout   = Render(fault.QueryTimeout)
)

// HTTP's own errors, which no lower package and no other protocol meets.
var (
	NoCredentials = httpOnly(http.StatusUnauthorized, 401001, "Authentication credentials were not provided.",
		"Authentication credentials were not provided.")
	MethodNotAllowed = httpOnly(http.StatusMethodNotAllowed, 405001, "Method not allowed.", nil)
	TooLarge         = httpOnly(http.StatusRequestEntityTooLarge, 413001, "Request body too large.", nil)
	UnsupportedMedia = httpOnly(http.StatusUnsupportedMediaType, 415001, "Unsupported media type.", nil)
	// ClientClosed is recorded when the client left before the answer; nobody reads the body.
	ClientClosed = httpOnly(499, 499001, "Client closed request.", nil) // nginx's status
)

func httpOnly(status, code int, message string, detail any) *Error {
	return &Error{status: status, Code: code, Message: message, Detail: detail}
}
