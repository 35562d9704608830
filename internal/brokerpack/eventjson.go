package brokerpack

import (
	"bytes"
	"strconv"

	"github.com/seckill-dev/seckill"
)

// The JSON layout of a ReservationEvent, read and written without
// reflection. External brokers carry events as JSON (writers of earlier
// versions read nothing else), and encoding/json cost the relay 1.2 µs and
// the order writer 2.7 µs per event, a sixth of the pipeline's CPU. The
// fast paths below handle exactly the bytes json.Marshal writes for an
// event whose strings are plain; anything else (escapes, other spacing or
// key order, a time JSON cannot hold) goes through encoding/json, so the
// result is the same either way (FuzzEventJSON holds both to it).

const (
	jsonReservationID = `{"reservation_id":"`
	jsonSaleID        = `","sale_id":"`
	jsonUserID        = `","user_id":"`
	jsonQty           = `","qty":`
	jsonReservedAt    = `,"reserved_at":"`
	jsonKeyDigest     = `","key_digest":"`
	jsonEnd           = `"}`
)

// plainJSON reports whether c stands for itself inside a JSON string as
// json.Marshal writes it (which escapes <, > and & for HTML) and as
// json.Unmarshal reads it.
func plainJSON(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

func allPlainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainJSON(s[i]) {
			return false
		}
	}
	return true
}

// eventJSONLen is the length of e's JSON for plain strings and a UTC time
// to the nanosecond.
func eventJSONLen(e seckill.ReservationEvent) int {
	return len(jsonReservationID+jsonSaleID+jsonUserID+jsonQty+jsonReservedAt+jsonKeyDigest+jsonEnd) +
		len(e.ReservationID) + len(e.SaleID) + len(e.UserID) + len(e.KeyDigest) + 20 + len("2006-01-02T15:04:05.999999999Z")
}

// appendEventJSON appends e as json.Marshal writes it; ok is false when a
// string is not plain or the time has no RFC 3339 form, for the caller to
// use encoding/json instead.
func appendEventJSON(b []byte, e seckill.ReservationEvent) (_ []byte, ok bool) {
	if !allPlainJSON(e.ReservationID) || !allPlainJSON(e.SaleID) || !allPlainJSON(e.UserID) || !allPlainJSON(e.KeyDigest) {
		return b, false
	}
	b = append(b, jsonReservationID...)
	b = append(b, e.ReservationID...)
	b = append(b, jsonSaleID...)
	b = append(b, e.SaleID...)
	b = append(b, jsonUserID...)
	b = append(b, e.UserID...)
	b = append(b, jsonQty...)
	b = strconv.AppendInt(b, e.Qty, 10)
	b = append(b, jsonReservedAt...)
	b, err := e.ReservedAt.AppendText(b) // MarshalJSON's text, unquoted
	if err != nil {
		return b, false
	}
	if e.KeyDigest != "" {
		b = append(b, jsonKeyDigest...)
		b = append(b, e.KeyDigest...)
	}
	return append(b, jsonEnd...), true
}

// decodeEventJSON reads body if it is in the layout appendEventJSON
// writes; ok is false otherwise (which may still be valid JSON, for
// encoding/json to read).
func decodeEventJSON(body []byte) (e seckill.ReservationEvent, ok bool) {
	r := body
	literal := func(s string) bool {
		if !bytes.HasPrefix(r, []byte(s)) {
			return false
		}
		r = r[len(s):]
		return true
	}
	plain := func() ([]byte, bool) {
		for i, c := range r {
			if c == '"' {
				s := r[:i]
				r = r[i:]
				return s, true
			}
			// <, > and & read as themselves, whoever wrote them.
			if !plainJSON(c) && c != '<' && c != '>' && c != '&' {
				return nil, false
			}
		}
		return nil, false
	}
	str := func(head string, dst *string) bool {
		if !literal(head) {
			return false
		}
		s, ok := plain()
		*dst = string(s)
		return ok
	}
	if !str(jsonReservationID, &e.ReservationID) || !str(jsonSaleID, &e.SaleID) || !str(jsonUserID, &e.UserID) || !literal(jsonQty) {
		return e, false
	}
	// An integer as json.Marshal writes one: no leading zeros, no
	// fraction or exponent, no "-0"; at most 18 digits, so it fits.
	n := 0
	if n < len(r) && r[n] == '-' {
		n++
	}
	digits := n
	for n < len(r) && n-digits < 19 && '0' <= r[n] && r[n] <= '9' {
		n++
	}
	switch {
	case n == digits || n-digits > 18:
		return e, false
	case r[digits] == '0' && (n-digits > 1 || digits > 0):
		return e, false
	}
	qty, err := strconv.ParseInt(string(r[:n]), 10, 64)
	if err != nil {
		return e, false
	}
	e.Qty = qty
	r = r[n:]
	if !literal(jsonReservedAt) {
		return e, false
	}
	at, ok := plain()
	if ok && bytes.HasPrefix(r, []byte(jsonKeyDigest)) {
		ok = str(jsonKeyDigest, &e.KeyDigest) && e.KeyDigest != ""
	}
	if !ok || !bytes.Equal(r, []byte(jsonEnd)) {
		return e, false
	}
	// UnmarshalText parses as Time.UnmarshalJSON does, without the quotes.
	if err := e.ReservedAt.UnmarshalText(at); err != nil {
		return e, false
	}
	return e, true
}
