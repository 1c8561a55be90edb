// Package apierr holds the one error type handlers return and the table that turns an
// error into an HTTP status and body (API.md §2). Handlers never write error JSON.
package apierr

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Error is an error with its HTTP rendering.
type Error struct {
	Status  int
	Code    int    // body "code"; 0 renders no code/message (the detail-only bodies)
	Message string // body "message"
	Detail  any    // body "detail": a string or a Fields map; nil omits it
	Header  map[string]string
}

func (e *Error) Error() string { return e.Message + " " + detailString(e.Detail) }

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

// Fields is a DRF-style validation detail: field path → messages.
type Fields map[string][]string

// Add appends a message for a field.
func (f Fields) Add(field, msg string) { f[field] = append(f[field], msg) }

// Err returns a 400001 error for the collected fields, or nil when there are none.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return Validation(f)
}

// Validation is 400001 with a field → messages detail.
func Validation(f Fields) *Error {
	return &Error{Status: http.StatusBadRequest, Code: 400001, Message: "Validation Error.", Detail: f}
}

// Invalid is 400001 naming one field.
func Invalid(field, msg string) *Error { return Validation(Fields{field: {msg}}) }

// ParseError is 400001 for a body that is not the JSON expected.
func ParseError(reason string) *Error {
	return Invalid("body", "JSON parse error - "+reason)
}

// NotFound is 404001 with a sentence naming what was missing.
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: 404001, Message: "Not found.", Detail: what}
}

var (
	NoCredentials = &Error{Status: http.StatusUnauthorized, Code: 401001,
		Message: "Authentication credentials were not provided.", Detail: "Authentication credentials were not provided."}
	BadCredentials = &Error{Status: http.StatusUnauthorized, Code: 401002,
		Message: "Incorrect authentication credentials.", Detail: "Incorrect authentication credentials."}
	Forbidden = &Error{Status: http.StatusForbidden, Code: 403001, Message: "You do not have permission to perform this action.",
		Detail: "You do not have permission to perform this action."}
	MethodNotAllowed = &Error{Status: http.StatusMethodNotAllowed, Code: 405001, Message: "Method not allowed."}
	TooLarge         = &Error{Status: http.StatusRequestEntityTooLarge, Code: 413001, Message: "Request body too large."}
	UnsupportedMedia = &Error{Status: http.StatusUnsupportedMediaType, Code: 415001, Message: "Unsupported media type."}
	DeviceDisabled   = &Error{Status: http.StatusLocked, Code: 423001, Message: "Device is disabled."}
	Unavailable      = &Error{Status: http.StatusServiceUnavailable, Code: 503001, Message: "Service unavailable.",
		Header: map[string]string{"Retry-After": "5"}}
	// ClientClosed is recorded (nginx's 499) when the client left before the answer;
	// nobody reads the body.
	ClientClosed = &Error{Status: 499, Code: 499001, Message: "Client closed request."}
	QueryTimeout = &Error{Status: http.StatusServiceUnavailable, Code: 503002,
		Message: "Query timed out.", Detail: "The query ran longer than the configured statement timeout.",
		Header: map[string]string{"Retry-After": "5"}}
	// QueueFull: the ingestion queue stayed full for SENSORAPI_INGEST_QUEUE_WAIT.
	QueueFull = &Error{Status: http.StatusServiceUnavailable, Code: 503003, Message: "Service unavailable.",
		Detail: "The ingestion queue is full; retry later.", Header: map[string]string{"Retry-After": "1"}}
)

// Internal is 500001; the detail names only the request id, never the cause.
func Internal(requestID string) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: 500001, Message: "Internal server error.",
		Detail: "request id " + requestID}
}

// IsUnavailable tells whether err means the database cannot be reached (503, retry
// later) rather than a bug.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pe):
		// class 08: connection exception; 57P01-03: shutdown, crash, starting up
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "failed to connect")
}

// IsTimeout tells whether err is a statement timeout or deadline.
func IsTimeout(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" { // query_canceled (statement_timeout)
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

func detailString(d any) string {
	switch v := d.(type) {
	case string:
		return v
	case Fields:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k + ": " + strings.Join(v[k], " ") + "; ")
		}
		return b.String()
	}
	return ""
}
