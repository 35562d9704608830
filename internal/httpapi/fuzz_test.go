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
		`{"qty":1}{}`, `{"qty":1} `, ` {"qty":1}`, `[1]`, `null`, ``, `{`, `{"qty":1`, "\xff",
		`{"qty":` + strings.Repeat("9", 400) + `}`, `{"qty":1,"pad":"` + strings.Repeat("a", 9000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
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
