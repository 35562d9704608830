package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
)

// FuzzDecodeReservationRequest: decoding never panics, every rejection is
// a client error in the API's vocabulary, and accepted input always yields
// a quantity the rest of the system can trust.
func FuzzDecodeReservationRequest(f *testing.F) {
	for _, seed := range []string{
		`{"qty":1}`, `{"qty":1000000}`, `{"qty":1000001}`, `{"qty":0}`, `{"qty":-1}`,
		`{"qty":9223372036854775807}`, `{"qty":9223372036854775808}`, `{"qty":1e3}`, `{"qty":1.0}`,
		`{"qty":"1"}`, `{"qty":null}`, `{"QTY":2}`, `{"qty":1,"qty":2}`, `{"qty":1,"x":1}`,
		`{"qty":1}{}`, `{"qty":1} `, ` {"qty":1}`, "\t{ \"qty\" :\r\n 12 }\n", `{"qty":01}`, `{"qty":123456789}`, `{"qty":1234567890}`, `[1]`, `null`, ``, `{`, `{"qty":1`, "\xff",
		`{"qty":` + strings.Repeat("9", 400) + `}`, `{"qty":1,"pad":"` + strings.Repeat("a", 9000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// The hand parser accepts only what encoding/json reads alike.
		if quick, ok := quickQty(body); ok {
			var req reservationRequest
			if err := decodeJSON(bytes.NewReader(body), &req); err != nil || req.Qty != quick {
				t.Fatalf("quickQty(%q) = %d; encoding/json: %d, %v", body, quick, req.Qty, err)
			}
		}
		qty, err := decodeReservationRequest(bytes.NewReader(body))
		if err != nil {
			if qty != 0 {
				t.Fatalf("qty %d returned with error %v", qty, err)
			}
			if code := seckill.ErrorCode(err); code != seckill.EINVALID {
				t.Fatalf("error code %q for %q, want %q", code, body, seckill.EINVALID)
			}
		} else if qty < 1 || qty > seckill.MaxPurchaseLimit {
			t.Fatalf("accepted %q with qty %d, want 1..%d", body, qty, seckill.MaxPurchaseLimit)
		}

		// Behind the body cap, as the handler reads it: the same answer
		// for a body within the cap; 413 or a rejection beyond it.
		capped, cErr := decodeReservationRequest(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), MaxBodyBytes))
		if len(body) <= MaxBodyBytes {
			if capped != qty || seckill.ErrorCode(cErr) != seckill.ErrorCode(err) {
				t.Fatalf("capped decode = %d, %v; uncapped = %d, %v", capped, cErr, qty, err)
			}
		} else if cErr == nil {
			t.Fatalf("accepted a %d-byte body over the %d-byte cap", len(body), MaxBodyBytes)
		} else if code := seckill.ErrorCode(cErr); code != seckill.EINVALID && code != seckill.ETOOLARGE {
			t.Fatalf("error code %q for an oversized body", code)
		}
	})
}

// TestQuickQty: the bodies clients send take the hand parser; the rest is
// left to encoding/json.
func TestQuickQty(t *testing.T) {
	for _, tt := range []struct {
		body string
		qty  int64
		ok   bool
	}{
		{`{"qty":1}`, 1, true},
		{" {\n  \"qty\": 25\n}\n", 25, true},
		{`{"qty":123456789}`, 123456789, true},
		{`{"qty":1234567890}`, 0, false}, // long: encoding/json decides
		{`{"qty":0}`, 0, false},
		{`{"qty":01}`, 0, false},
		{`{"qty":-1}`, 0, false},
		{`{"qty":1.0}`, 0, false},
		{`{"qty":1,"x":2}`, 0, false},
		{`{"qty":1}x`, 0, false},
		{`{"QTY":1}`, 0, false},
		{`{"qty":1`, 0, false},
		{``, 0, false},
	} {
		if qty, ok := quickQty([]byte(tt.body)); qty != tt.qty || ok != tt.ok {
			t.Errorf("quickQty(%q) = %d, %v; want %d, %v", tt.body, qty, ok, tt.qty, tt.ok)
		}
	}
}
