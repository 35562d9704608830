package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/seckill-dev/seckill"
)

// codeStatus is the one table from error codes to HTTP statuses. Codes not
// in it are answered 500.
var codeStatus = map[string]int{
	seckill.ESOLDOUT:        http.StatusConflict,
	seckill.EPURCHASELIMIT:  http.StatusConflict,
	seckill.ENOTSTARTED:     http.StatusConflict,
	seckill.EENDED:          http.StatusConflict,
	seckill.EADMISSION:      http.StatusConflict,
	seckill.ECONFLICT:       http.StatusConflict,
	seckill.ESTATECONFLICT:  http.StatusConflict,
	seckill.EKEYREUSED:      http.StatusUnprocessableEntity,
	seckill.EINVALID:        http.StatusBadRequest,
	seckill.EUNAUTHORIZED:   http.StatusUnauthorized,
	seckill.ENOTFOUND:       http.StatusNotFound,
	seckill.ESALENOTFOUND:   http.StatusNotFound,
	seckill.EMETHODNOTALLOW: http.StatusMethodNotAllowed,
	seckill.ETOOLARGE:       http.StatusRequestEntityTooLarge,
	seckill.ERATELIMITED:    http.StatusTooManyRequests,
	seckill.EOVERLOADED:     http.StatusServiceUnavailable,
	seckill.EUNAVAILABLE:    http.StatusServiceUnavailable,
	seckill.ETRYLATER:       http.StatusServiceUnavailable,
	seckill.EINTERNAL:       http.StatusInternalServerError,
}

// ErrorStatus returns the HTTP status for an error code.
func ErrorStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// statusClientClosed is recorded (never sent) when the client went away
// before an answer was ready, as nginx does, so hang-ups do not show up as
// server errors in the metrics.
const statusClientClosed = 499

// defaultRetryAfter is sent with 429 and 503 answers unless the code that
// produced the error set its own Retry-After.
const defaultRetryAfter = "1"

type errorResponse struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError writes err in the API's error shape,
// {"error":{"code":…,"message":…}}, with the status the code maps to, and
// returns that status. Errors that are not a *seckill.Error are answered as
// internal errors without their text. WriteError does not log: it is
// exported so middleware in front of the Handler (rate limits, load
// shedding) answers in the same shape; such callers log internal errors
// themselves. A Retry-After header already set is kept.
func WriteError(w http.ResponseWriter, err error) int {
	var re *retryError
	if errors.As(err, &re) {
		w.Header().Set("Retry-After", retryAfterSeconds(re.after))
	}
	code := seckill.ErrorCode(err)
	status := ErrorStatus(code)
	body, mErr := json.Marshal(errorResponse{errorBody{Code: code, Message: seckill.ErrorMessage(err)}})
	if mErr != nil { // cannot happen for two strings; keep the shape anyway
		body = []byte(`{"error":{"code":"internal","message":"Internal error."}}`)
	}
	writeErrorBody(w, status, body)
	return status
}

func writeErrorBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	switch status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="seckill"`)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if h.Get("Retry-After") == "" {
			h.Set("Retry-After", defaultRetryAfter)
		}
	}
	writeBodyTo(w, h, status, body)
}

// retryError is an error answered with a Retry-After of its own.
type retryError struct {
	err   *seckill.Error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// writeError answers err and logs it when it is internal, never with
// headers or bodies (they hold tokens). A request whose client has gone
// is not answered or logged.
//
// A spent deadline, the request's budget or a backend call's own, is an
// outage answer (503 unavailable + Retry-After), not an internal error.
// Every outage answer is counted as degraded.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) int {
	if seckill.ErrorCode(err) == seckill.EINTERNAL {
		if clientGone(r.Context()) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return statusClientClosed
		}
		err = timedOut(r.Context(), err)
	}
	switch seckill.ErrorCode(err) {
	case seckill.EINTERNAL:
		s.logger.ErrorContext(r.Context(), "http request failed",
			"method", r.Method, "route", r.Pattern, "err", err)
	case seckill.EUNAVAILABLE:
		s.metrics.degrade(r.Pattern, degradedUnavailable)
	}
	return WriteError(w, err)
}

// staticError is an error answer whose body is marshalled once: the
// reservation hot path answers sold_out to most of a stampede.
type staticError struct {
	code   string
	status int
	body   []byte
}

func newStaticError(code, message string) *staticError {
	body, err := json.Marshal(errorResponse{errorBody{Code: code, Message: message}})
	if err != nil {
		panic(err)
	}
	return &staticError{code: code, status: ErrorStatus(code), body: body}
}

func (e *staticError) write(w http.ResponseWriter) int {
	writeErrorBody(w, e.status, e.body)
	return e.status
}

var (
	errSoldOut         = newStaticError(seckill.ESOLDOUT, "The sale is sold out.")
	errLimitExceeded   = newStaticError(seckill.EPURCHASELIMIT, "The per-buyer limit of this sale has been reached.")
	errNotStarted      = newStaticError(seckill.ENOTSTARTED, "The sale has not started yet.")
	errEnded           = newStaticError(seckill.EENDED, "The sale has ended.")
	errNotLoaded       = newStaticError(seckill.ETRYLATER, "The sale has started and is being loaded; retry shortly.")
	errEntriesLoading  = seckill.Errorf(seckill.ETRYLATER, "The draw's entries are being loaded; retry shortly.")
	errRoomLoading     = seckill.Errorf(seckill.ETRYLATER, "The waiting room is being loaded; retry shortly.")
	errPlaceRestoring  = seckill.Errorf(seckill.ETRYLATER, "Your place is kept while the waiting room is being put back; ask again shortly.")
	errAdmission       = newStaticError(seckill.EADMISSION, "This sale does not sell first come: enter its draw, or its queue, instead (GET /api/v1/sales/{id} tells which).")
	errKeyReused       = newStaticError(seckill.EKEYREUSED, "This Idempotency-Key was already used with a different request.")
	errSaleNotFound    = newStaticError(seckill.ESALENOTFOUND, "No such sale.")
	errRouteNotFound   = newStaticError(seckill.ENOTFOUND, "No such resource.")
	errMethodNotAllow  = newStaticError(seckill.EMETHODNOTALLOW, "Method not allowed on this resource.")
	errAdminAuth       = newStaticError(seckill.EUNAUTHORIZED, "The admin token is required (Authorization: Bearer ADMIN_TOKEN).")
	errMetricsAuth     = newStaticError(seckill.EUNAUTHORIZED, "The metrics token is required (Authorization: Bearer METRICS_TOKEN).")
	errNotReady        = newStaticError(seckill.EUNAVAILABLE, "Not ready: a backend is unreachable.")
	errInternalGeneric = newStaticError(seckill.EINTERNAL, "Internal error.")
)
