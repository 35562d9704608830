package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

var (
	errBodyRequired = seckill.Errorf(seckill.EINVALID, "A JSON request body is required.")
	errBodyTooLarge = seckill.Errorf(seckill.ETOOLARGE, "The request body must be at most %d bytes.", MaxBodyBytes)
	errTrailingData = seckill.Errorf(seckill.EINVALID, "The request body must hold exactly one JSON object.")
	errMalformed    = seckill.Errorf(seckill.EINVALID, "The request body is not valid JSON.")
	errContentType  = seckill.Errorf(seckill.EINVALID, "Content-Type must be application/json.")
	errQtyRange     = seckill.Errorf(seckill.EINVALID, "qty must be a whole number from 1 to %d.", seckill.MaxPurchaseLimit)
)

// checkContentType accepts a JSON media type, or none at all: curl and
// many scripts send no Content-Type with a JSON body.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errContentType
	}
	return nil
}

// decodeJSON decodes exactly one JSON value from r into v, strictly:
// unknown fields, wrong types and anything after the value are errors.
// Errors are *seckill.Error with a message safe to show.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// Only whitespace may follow. Token reads past it, so a body over the
	// limit is reported as such even when its first value is complete.
	if _, err := dec.Token(); err != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errBodyTooLarge
		}
		return errTrailingData
	}
	return nil
}

func decodeError(err error) error {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return errBodyTooLarge
	case errors.Is(err, io.EOF):
		return errBodyRequired
	case errors.Is(err, io.ErrUnexpectedEOF):
		return seckill.Errorf(seckill.EINVALID, "The request body is truncated JSON.")
	case errors.As(err, &syntax):
		return seckill.Errorf(seckill.EINVALID, "The request body is not valid JSON (at byte %d).", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return seckill.Errorf(seckill.EINVALID, "The request body must be a JSON object.")
		}
		return seckill.Errorf(seckill.EINVALID, "Field %q has the wrong type.", typ.Field)
	}
	// encoding/json has no type for this one; its text is stable and
	// quotes the field name.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return seckill.Errorf(seckill.EINVALID, "Unknown field %s.", field)
	}
	return errMalformed
}

// reservationRequest is the body of POST /api/v1/sales/{id}/reservations.
type reservationRequest struct {
	Qty int64 `json:"qty"`
}

// decodeReservationRequest decodes a reservation body. Accepted input
// always yields 1 <= qty <= seckill.MaxPurchaseLimit; a missing or null qty
// is rejected like a zero.
func decodeReservationRequest(r io.Reader) (qty int64, err error) {
	var req reservationRequest
	if err := decodeJSON(r, &req); err != nil {
		return 0, err
	}
	if req.Qty < 1 || req.Qty > seckill.MaxPurchaseLimit {
		return 0, errQtyRange
	}
	return req.Qty, nil
}

// saleRequest is the body of POST /admin/v1/sales. Times are strings so a
// bad one gets a message naming the field and the format.
type saleRequest struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	PriceCents    *int64 `json:"price_cents"` // 0 is a valid price, so absence must show
	Currency      string `json:"currency"`    // empty: Config.Currency
	Stock         int64  `json:"stock"`
	PurchaseLimit int64  `json:"per_user_limit"`
	Buckets       int64  `json:"buckets"` // optional: stock buckets over Redis slots
	StartAt       string `json:"start_at"`
	EndAt         string `json:"end_at"`
}

// decodeSaleRequest decodes and validates a new sale. An empty id is left
// empty for the caller to fill in; any other field error is EINVALID.
func decodeSaleRequest(r io.Reader) (*seckill.Sale, error) {
	var req saleRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.PriceCents == nil {
		return nil, seckill.Errorf(seckill.EINVALID, "price_cents is required.")
	}
	start, err := parseTime("start_at", req.StartAt)
	if err != nil {
		return nil, err
	}
	end, err := parseTime("end_at", req.EndAt)
	if err != nil {
		return nil, err
	}
	return &seckill.Sale{
		ID:            req.ID,
		Name:          req.Name,
		PriceCents:    *req.PriceCents,
		Currency:      req.Currency,
		Stock:         req.Stock,
		PurchaseLimit: req.PurchaseLimit,
		Buckets:       req.Buckets,
		StartAt:       start,
		EndAt:         end,
	}, nil
}

// parseTime parses an RFC 3339 time, kept in UTC at microsecond precision:
// what every supported database stores, so the 201 shows what a later read
// returns.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, seckill.Errorf(seckill.EINVALID, "%s is required (RFC 3339, e.g. 2030-01-02T15:04:05Z).", field)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, seckill.Errorf(seckill.EINVALID, "%s must be an RFC 3339 time, e.g. 2030-01-02T15:04:05Z.", field)
	}
	return t.UTC().Truncate(time.Microsecond), nil
}
