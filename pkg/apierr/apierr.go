// Package apierr holds the one error type handlers return, its kinds, and the table that
// turns a kind into an HTTP status (API.md §2). Handlers never write error JSON.
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

// Kind is what went wrong, whichever protocol answers: HTTP with its status (httpStatus
// below), MQTT with its reason code (pkg/mqtt), as Prometheus' API maps its error types.
type Kind int

// The kinds; the zero Kind is a bug.
const (
	KindInternal         Kind = iota
	KindInvalid               // the request's content: fields, JSON, values
	KindUnauthenticated       // no token, or an unknown or revoked one
	KindForbidden             // the token's scope does not cover it
	KindNotFound              // an unknown key, or another account's
	KindMethodNotAllowed      // a known path with a wrong method
	KindTooLarge              // a body over the limit
	KindUnsupportedMedia      // a body that is not JSON
	KindDisabled              // values sent to a disabled Device
	KindRateLimited           // the token's request budget is spent
	KindClientClosed          // the client left before the answer
	KindUnavailable           // the database cannot answer now, or a queue is full: retry
	KindStorageFull           // the database is past its size budget: writes wait for room
)

// httpStatus is the HTTP status of each kind.
var httpStatus = map[Kind]int{
	KindInternal:         http.StatusInternalServerError,
	KindInvalid:          http.StatusBadRequest,
	KindUnauthenticated:  http.StatusUnauthorized,
	KindForbidden:        http.StatusForbidden,
	KindNotFound:         http.StatusNotFound,
	KindMethodNotAllowed: http.StatusMethodNotAllowed,
	KindTooLarge:         http.StatusRequestEntityTooLarge,
	KindUnsupportedMedia: http.StatusUnsupportedMediaType,
	KindDisabled:         http.StatusLocked,
	KindRateLimited:      http.StatusTooManyRequests,
	KindClientClosed:     499, // nginx's
	KindUnavailable:      http.StatusServiceUnavailable,
	KindStorageFull:      http.StatusInsufficientStorage,
}

// Error is an error of a kind with its HTTP rendering.
type Error struct {
	Kind    Kind
	Code    int    // body "code"; 0 renders no code/message (the detail-only bodies)
	Message string // body "message"
	Detail  any    // body "detail": a string or a Fields map; nil omits it
	Header  map[string]string
}

// New is an error of kind k rendered with that body code, message and detail.
func New(k Kind, code int, message string, detail any) *Error {
	return &Error{Kind: k, Code: code, Message: message, Detail: detail}
}

// Status is the HTTP status of the error's kind.
func (e *Error) Status() int { return httpStatus[e.Kind] }

// RetryAfter returns a copy that tells the client to retry after secs seconds.
func (e *Error) RetryAfter(secs string) *Error {
	c := *e
	c.Header = map[string]string{"Retry-After": secs}
	return &c
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
	return New(KindInvalid, 400001, "Validation Error.", f)
}

// Invalid is 400001 naming one field.
func Invalid(field, msg string) *Error { return Validation(Fields{field: {msg}}) }

// ParseError is 400001 for a body that is not the JSON expected.
func ParseError(reason string) *Error {
	return Invalid("body", "JSON parse error - "+reason)
}

// NotFound is 404001 with a sentence naming what was missing.
func NotFound(what string) *Error {
	return New(KindNotFound, 404001, "Not found.", what)
}

var (
	NoCredentials = New(KindUnauthenticated, 401001, "Authentication credentials were not provided.",
		"Authentication credentials were not provided.")
	BadCredentials = New(KindUnauthenticated, 401002, "Incorrect authentication credentials.",
		"Incorrect authentication credentials.")
	Forbidden = New(KindForbidden, 403001, "You do not have permission to perform this action.",
		"You do not have permission to perform this action.")
	MethodNotAllowed = New(KindMethodNotAllowed, 405001, "Method not allowed.", nil)
	TooLarge         = New(KindTooLarge, 413001, "Request body too large.", nil)
	UnsupportedMedia = New(KindUnsupportedMedia, 415001, "Unsupported media type.", nil)
	DeviceDisabled   = New(KindDisabled, 423001, "Device is disabled.", nil)
	Unavailable      = New(KindUnavailable, 503001, "Service unavailable.", nil).RetryAfter("5")
	// ClientClosed is recorded when the client left before the answer; nobody reads the body.
	ClientClosed = New(KindClientClosed, 499001, "Client closed request.", nil)
	QueryTimeout = New(KindUnavailable, 503002, "Query timed out.",
		"The query ran longer than the configured statement timeout.").RetryAfter("5")
	// StorageBudget: the database is past SENSORAPI_WRITE_STOP_SIZE (API.md §16).
	StorageBudget = New(KindStorageFull, 507001, "Storage budget exhausted.", nil)
	// QueueFull: the ingestion queue stayed full for SENSORAPI_INGEST_QUEUE_WAIT.
	QueueFull = New(KindUnavailable, 503003, "Service unavailable.",
		"The ingestion queue is full; retry later.").RetryAfter("1")
)

// Internal is 500001; the detail names only the request id, never the cause.
func Internal(requestID string) *Error {
	return New(KindInternal, 500001, "Internal server error.", "request id "+requestID)
}

// Causes of a database that cannot do the work now, as the 503's detail names them.
const (
	CauseDiskFull    = "The database is out of disk space."
	CauseMemory      = "The database is out of memory."
	CauseConnections = "The database has no connection to spare."
	CauseResources   = "The database is out of a resource."
	CauseRestarting  = "The database is restarting or recovering."
	CauseReadOnly    = "The database is read-only (a standby, e.g. during a failover)."
	CauseUnreachable = "The database cannot be reached."
)

// FromDatabase maps a fault of the environment to a 503 that names its cause (API.md
// §2), by SQLSTATE class rather than by message: 53 (insufficient resources), 57P
// (shutdown, crash recovery, cannot connect now), 08 (connection) and 25006 (read-only
// transaction: a standby after a failover), and the driver's and network's own
// connection errors. nil when err is no such fault (a bug, a bad request).
func FromDatabase(err error) *Error {
	cause := databaseCause(err)
	if cause == "" {
		return nil
	}
	return New(KindUnavailable, 503001, "Service unavailable.", cause).RetryAfter("5")
}

// databaseCause is FromDatabase's cause, "" when err is not a fault of the environment.
func databaseCause(err error) string {
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgCause(pe.Code)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), pgconn.SafeToRetry(err):
		return CauseUnreachable
	}
	msg := err.Error()
	if strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "failed to connect") {
		return CauseUnreachable
	}
	return ""
}

// pgCause names the environment fault a SQLSTATE reports, "" for any other.
func pgCause(code string) string {
	switch {
	case code == "53100":
		return CauseDiskFull
	case code == "53200":
		return CauseMemory
	case code == "53300":
		return CauseConnections
	case strings.HasPrefix(code, "53"):
		return CauseResources
	case strings.HasPrefix(code, "57P"):
		return CauseRestarting
	case strings.HasPrefix(code, "08"):
		return CauseUnreachable
	case code == "25006":
		return CauseReadOnly
	}
	return ""
}

// MsgDataRefused is the message of DataException's 400.
const MsgDataRefused = "The database cannot store a value or context of this message (invalid data)."

// DataException maps a data exception (SQLSTATE class 22: a value the database cannot
// store or convert, such as a string jsonb refuses or a number beyond numeric) out of
// a write to a 400001 on "body": the request's data is at fault, not the server, and
// an MQTT client told so does not send it again. nil when err is no such exception.
// It is the net under validation, which refuses the known cases naming their field.
func DataException(err error) *Error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		return nil
	}
	return Invalid("body", MsgDataRefused)
}

// IsTimeout tells whether err is a statement timeout or deadline.
func IsTimeout(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" { // query_canceled (statement_timeout)
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// IsOutOfRange tells whether PostgreSQL refused a result beyond its type's range
// (22003: a float8 sum past the largest double): readers then run the statement's IEEE
// form (querybuilder.Query.IEEE).
func IsOutOfRange(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22003"
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
