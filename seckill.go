// Package seckill is the domain of the flash-sale engine: sales,
// reservations, orders, the API's error codes, the rules as pure functions,
// and the ports shared by several packages (a port with one consumer lives
// in it). It imports no Redis, SQL, AMQP or NATS code, so the promises of
// docs/design.md read in one place.
package seckill

import (
	"errors"
	"fmt"
)

// Error codes: the HTTP API's public contract, so they never change meaning.
// Their statuses are one table in internal/httpapi.
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
	EADMISSION      = "admission_required" // the sale's admission mode refuses this call
)

// Error is the one error a client sees: Code is an E* constant, Message is
// safe to show.
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

// ErrorCode is err's code; EINTERNAL for a non-nil error that is no *Error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage is err's client-safe message: internal errors may carry
// hostnames, SQL or secrets, so they are never shown.
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
	ErrNotFound  = errors.New("not found") // no such row or key
	ErrDuplicate = errors.New("duplicate") // a unique key is taken
	ErrClosed    = errors.New("closed")    // the service was stopped
)

// ErrBadSignature is a token refused because its signature, once checked,
// did not match. It is the one refusal that costs the server a signature
// check (an RS256 key's is some 70 µs of CPU, three sold-out answers), and
// a client can send as many as it likes: the API limits them per address
// (httpapi.Config.BadSignatureLimit). Its message is what a buyer sees.
var ErrBadSignature = Errorf(EUNAUTHORIZED, "Invalid token.")
