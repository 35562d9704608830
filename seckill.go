// Package seckill holds the domain of the flash-sale engine: sales,
// reservations, orders, the error codes the API speaks, and the ports
// (interfaces) that the technology packages under internal/ implement.
//
// It imports no Redis, SQL, AMQP or NATS code. Everything here is plain
// data and rules, so the promises of the design (docs/design.md: never
// oversell, never lose a claim, answer fast and clearly) can be read in
// one place.
package seckill

import (
	"errors"
	"fmt"
)

// Error codes. They are the public contract of the HTTP API: clients branch
// on them, so they never change meaning. The HTTP status for each lives in
// one table in internal/httpapi.
const (
	ECONFLICT       = "conflict"               // e.g. sale id taken
	EINTERNAL       = "internal"               // a bug or a backend failure
	EINVALID        = "invalid_request"        // malformed or out-of-range input
	ENOTFOUND       = "not_found"              // generic not found
	ESALENOTFOUND   = "sale_not_found"         // no such sale
	EUNAUTHORIZED   = "unauthorized"           // missing, forged or expired credentials
	ETOOLARGE       = "body_too_large"         // request body over the limit
	ESOLDOUT        = "sold_out"               // no stock left
	EPURCHASELIMIT  = "limit_exceeded"         // per-user purchase limit reached
	ENOTSTARTED     = "not_started"            // sale window not open yet
	EENDED          = "ended"                  // sale window closed
	EKEYREUSED      = "idempotency_key_reused" // same key, different request
	ERATELIMITED    = "rate_limited"           // too many requests
	EOVERLOADED     = "overloaded"             // load shed; retry later
	EUNAVAILABLE    = "unavailable"            // a backend is unreachable; retry later
	ETRYLATER       = "try_later"              // the claim could not be made durable, or the sale is healing; retry later
	ESTATECONFLICT  = "state_conflict"         // e.g. pay after the order was cancelled
	EMETHODNOTALLOW = "method_not_allowed"
	EADMISSION      = "admission_required" // the sale's admission mode does not allow this call (a lottery takes entries, a queue needs a ticket)
)

// Error is the one error type that crosses package boundaries when the
// caller is meant to see it. Code is one of the E* constants; Message is
// safe to show to the client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("seckill error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, and
// EINTERNAL for any other non-nil error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err. Internal errors are
// never shown verbatim: they may carry hostnames, SQL or secrets.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// Sentinels that adapters return and callers branch on.
var (
	// ErrNotFound is returned by stores when a row or key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate is returned by stores when a unique key is already taken.
	ErrDuplicate = errors.New("duplicate")
	// ErrClosed is returned by services that have been stopped.
	ErrClosed = errors.New("closed")
)
