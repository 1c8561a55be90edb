package fault

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Causes of a database that cannot do the work now, as an unavailable error's detail
// names them.
const (
	CauseDiskFull    = "The database is out of disk space."
	CauseMemory      = "The database is out of memory."
	CauseConnections = "The database has no connection to spare."
	CauseResources   = "The database is out of a resource."
	CauseRestarting  = "The database is restarting or recovering."
	CauseReadOnly    = "The database is read-only (a standby, e.g. during a failover)."
	CauseUnreachable = "The database cannot be reached."
)

// FromDatabase maps a fault of the environment to an unavailable error that names its
// cause (API.md §2), by SQLSTATE class rather than by message: 53 (insufficient
// resources), 57P (shutdown, crash recovery, cannot connect now), 08 (connection) and
// 25006 (read-only transaction: a standby after a failover), and the driver's and
// network's own connection errors. nil when err is no such fault (a bug, a bad request).
func FromDatabase(err error) *Error {
	cause := databaseCause(err)
	if cause == "" {
		return nil
	}
	return &Error{Kind: KindUnavailable, Detail: cause, Err: err}
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

// MsgDataRefused is the message of DataException's invalid error.
const MsgDataRefused = "The database cannot store a value or context of this message (invalid data)."

// DataException maps a data exception (SQLSTATE class 22: a value the database cannot
// store or convert, such as a string jsonb refuses or a number beyond numeric) out of
// a write to an invalid error on "body": the request's data is at fault, not the
// server, and an MQTT client told so does not send it again. nil when err is no such
// exception. It is the net under validation, which refuses the known cases naming
// their field.
func DataException(err error) *Error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		return nil
	}
	return Invalid("body", MsgDataRefused) // no cause: callers that look for class 22 see none
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
