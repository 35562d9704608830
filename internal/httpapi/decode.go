package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
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
func decodeJSON(r io.Reader, v any) error { return decodeBody(r, v, true) }

// decodeProviderJSON decodes an event a payment provider or a shop's
// server sends: fields seckill does not know are ignored, not refused, so
// that a provider adding one does not turn every delivery into a 400 that
// it retries for days.
func decodeProviderJSON(r io.Reader, v any) error { return decodeBody(r, v, false) }

func decodeBody(r io.Reader, v any, strict bool) error {
	dec := json.NewDecoder(r)
	if strict {
		dec.DisallowUnknownFields()
	}
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
//
// The body every client sends, {"qty":N}, is read into a pooled buffer and
// parsed by hand (quickQty); anything else, or a body longer than the
// buffer, goes through encoding/json on the same bytes, so both paths give
// one answer (FuzzDecodeReservationRequest checks that they agree).
func decodeReservationRequest(r io.Reader) (qty int64, err error) {
	buf := bodyBufs.Get().(*[bodyPeek]byte)
	defer bodyBufs.Put(buf)
	n, rerr := readUpTo(r, buf[:])
	if rerr == io.EOF {
		if q, ok := quickQty(buf[:n]); ok {
			if q > seckill.MaxPurchaseLimit {
				return 0, errQtyRange
			}
			return q, nil
		}
	}
	var body io.Reader = bytes.NewReader(buf[:n])
	switch {
	case rerr == nil: // the buffer is full: the rest follows
		body = io.MultiReader(body, r)
	case rerr != io.EOF:
		body = io.MultiReader(body, errReader{rerr})
	}
	var req reservationRequest
	if err := decodeJSON(body, &req); err != nil {
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
	// Admission is optional: first come when absent.
	Admission *admissionRequest `json:"admission"`
}

// admissionRequest is a sale's admission rule as an operator sends it.
type admissionRequest struct {
	Mode           string `json:"mode"`
	EntriesCloseAt string `json:"entries_close_at"`
	AdmitPerSecond int64  `json:"admit_per_second"`
	// Adaptive, if present, lets a queue's rate follow the engine's
	// latency from admit_per_second.
	Adaptive *seckill.AdaptiveAdmission `json:"adaptive"`
}

func (a *admissionRequest) decode() (seckill.Admission, error) {
	if a == nil {
		return seckill.Admission{}, nil
	}
	out := seckill.Admission{Mode: seckill.AdmissionMode(a.Mode), AdmitPerSecond: a.AdmitPerSecond, Adaptive: a.Adaptive}
	if a.EntriesCloseAt != "" {
		t, err := parseTime("admission.entries_close_at", a.EntriesCloseAt)
		if err != nil {
			return out, err
		}
		out.EntriesCloseAt = t
	}
	if out == (seckill.Admission{Mode: seckill.AdmitFirstCome}) {
		out = seckill.Admission{} // first come is the zero value
	}
	return out, nil
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
	admission, err := req.Admission.decode()
	if err != nil {
		return nil, err
	}
	return &seckill.Sale{
		Admission:     admission,
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

// bodyPeek is how much of a reservation body is read before deciding how
// to parse it: far more than {"qty":N} with any sane spacing.
const bodyPeek = 256

var bodyBufs = sync.Pool{New: func() any { return new([bodyPeek]byte) }}

// readUpTo reads r into buf until buf is full (nil error), r ends (io.EOF)
// or fails.
func readUpTo(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// errReader replays a read error after the bytes read before it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// quickQty parses the one body shape clients send, {"qty":N} with JSON
// whitespace anywhere between tokens, N a positive integer of at most 9
// digits without a leading zero. ok is false for anything else, which
// encoding/json then judges.
func quickQty(b []byte) (qty int64, ok bool) {
	i := skipSpace(b, 0)
	for _, tok := range []string{"{", `"qty"`, ":"} {
		if string(b[i:min(len(b), i+len(tok))]) != tok {
			return 0, false
		}
		i = skipSpace(b, i+len(tok))
	}
	start := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' && i-start < 10 {
		qty = qty*10 + int64(b[i]-'0')
		i++
	}
	if digits := i - start; digits == 0 || digits > 9 || b[start] == '0' {
		return 0, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '}' || skipSpace(b, i+1) != len(b) {
		return 0, false
	}
	return qty, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
