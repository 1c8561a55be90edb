// Package fault says what went wrong, whichever protocol answers: an error's Kind
// (invalid, not found, disabled, unavailable, …), its detail (a sentence, or Fields:
// each field's messages) and the cause behind it. It holds no HTTP status, body code,
// Retry-After or MQTT reason: pkg/apierr renders a fault for HTTP and pkg/mqtt for MQTT,
// each from one table of kinds, as Prometheus' API maps its error types. Lower packages
// (ingest, events, synthetic, …) return these errors; it also classifies the database's
// errors (FromDatabase, DataException, IsTimeout, IsOutOfRange).
package fault

import (
	"sort"
	"strings"
)

// Kind is what went wrong; every renderer has one entry for each.
type Kind int

// The kinds; the zero Kind is a bug.
const (
	KindInternal        Kind = iota // a bug: nothing the client can change
	KindInvalid                     // the request's content: fields, JSON, values
	KindUnauthenticated             // an unknown or revoked credential
	KindForbidden                   // the credential's scope does not cover it
	KindNotFound                    // an unknown key, or another account's
	KindDisabled                    // values sent to a disabled Device
	KindUnavailable                 // the database cannot answer now: retry
	KindQueryTimeout                // a statement ran past its timeout: retry
	KindQueueFull                   // the ingestion queue stayed full: retry soon
	KindStorageFull                 // the database is past its size budget: writes wait for room
	KindTooLarge                    // a body past its limit (a history import's, decompressed)
	numKinds
)

var kindNames = [numKinds]string{
	KindInternal:        "internal error",
	KindInvalid:         "invalid",
	KindUnauthenticated: "unauthenticated",
	KindForbidden:       "forbidden",
	KindNotFound:        "not found",
	KindDisabled:        "device is disabled",
	KindUnavailable:     "unavailable",
	KindQueryTimeout:    "query timed out",
	KindQueueFull:       "ingestion queue full",
	KindStorageFull:     "storage budget exhausted",
	KindTooLarge:        "too large",
}

// Kinds lists every kind, for the renderers' tests that each has its entry.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return "unknown kind"
	}
	return kindNames[k]
}

// Error is an error of a kind, with its detail and, if any, its cause.
type Error struct {
	Kind   Kind
	Detail any   // a sentence (string) or Fields; nil for none
	Err    error // the cause, for logs and errors.Is/As; never shown to a client
}

// New is an error of kind k with that detail (a sentence, Fields or nil).
func New(k Kind, detail any) *Error { return &Error{Kind: k, Detail: detail} }

func (e *Error) Error() string {
	s := e.Kind.String()
	if d := detailString(e.Detail); d != "" {
		s += ": " + d
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Fields is a DRF-style validation detail: field path → messages.
type Fields map[string][]string

// Add appends a message for a field.
func (f Fields) Add(field, msg string) { f[field] = append(f[field], msg) }

// Err returns an invalid error for the collected fields, or nil when there are none.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return New(KindInvalid, f)
}

// Invalid is an invalid error naming one field.
func Invalid(field, msg string) *Error { return New(KindInvalid, Fields{field: {msg}}) }

// ParseError is an invalid error on "body": it is not the JSON expected.
func ParseError(reason string) *Error {
	return Invalid("body", "JSON parse error - "+reason)
}

// NotFound is a not-found error with a sentence naming what was missing.
func NotFound(what string) *Error { return New(KindNotFound, what) }

var (
	// DeviceDisabled: values sent to a Device whose isActive is false.
	DeviceDisabled = New(KindDisabled, nil)
	// Unavailable: the database cannot answer now, for a cause not known.
	Unavailable = New(KindUnavailable, nil)
	// QueryTimeout: a statement ran past the configured statement timeout.
	QueryTimeout = New(KindQueryTimeout, "The query ran longer than the configured statement timeout.")
	// QueueFull: the ingestion queue stayed full for SENSORAPI_INGEST_QUEUE_WAIT.
	QueueFull = New(KindQueueFull, "The ingestion queue is full; retry later.")
	// StorageBudget: the database is past SENSORAPI_WRITE_STOP_SIZE (API.md §16).
	StorageBudget = New(KindStorageFull, nil)
	// TooLarge: a body past its configured limit.
	TooLarge = New(KindTooLarge, nil)
	// Unauthenticated: an unknown or revoked credential.
	Unauthenticated = New(KindUnauthenticated, "Incorrect authentication credentials.")
	// Forbidden: the credential's scope does not cover the request.
	Forbidden = New(KindForbidden, "You do not have permission to perform this action.")
)

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
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+": "+strings.Join(v[k], " "))
		}
		return strings.Join(parts, "; ")
	}
	return ""
}
