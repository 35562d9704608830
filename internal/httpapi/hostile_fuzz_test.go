package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
)

// FuzzDecodeSaleRequest: the admin sale body never panics the decoder;
// rejections are client errors; what is accepted and then validated is a
// sale every store can hold, with times as the database keeps them.
func FuzzDecodeSaleRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"Tea","price_cents":9900,"stock":200,"per_user_limit":1,"start_at":"2030-01-01T12:00:00Z","end_at":"2030-01-01T13:00:00Z"}`,
		`{"id":"tea-2030","name":"Tea","price_cents":0,"stock":1,"per_user_limit":1,"start_at":"2030-01-01T12:00:00.123456789+08:00","end_at":"2030-01-01T13:00:00Z"}`,
		`{"name":"Tea","price_cents":null,"stock":1,"per_user_limit":1,"start_at":"2030-01-01T12:00:00Z","end_at":"2030-01-01T13:00:00Z"}`,
		`{"name":"Tea","price_cents":1,"stock":9223372036854775807,"per_user_limit":-1,"start_at":"0000-01-01T00:00:00Z","end_at":"9999-12-31T23:59:59Z"}`,
		`{"name":"\u0000","price_cents":1e3}`, `{"id":"a{b}"}`, `{}`, `[]`, `null`, ``, `{"start_at":"2030-02-30T00:00:00Z"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sale, err := decodeSaleRequest(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), MaxBodyBytes))
		if err != nil {
			if sale != nil {
				t.Fatalf("sale %+v returned with error %v", sale, err)
			}
			if code := seckill.ErrorCode(err); code != seckill.EINVALID && code != seckill.ETOOLARGE {
				t.Fatalf("error code %q for %q", code, body)
			}
			return
		}
		if sale.StartAt.Location() != time.UTC || sale.EndAt.Location() != time.UTC ||
			sale.StartAt.Nanosecond()%1000 != 0 || sale.EndAt.Nanosecond()%1000 != 0 {
			t.Fatalf("times %v, %v: want UTC at microsecond precision", sale.StartAt, sale.EndAt)
		}
		if sale.ID == "" {
			sale.ID = "fuzz"
		}
		if err := sale.Validate(); err != nil {
			if seckill.ErrorCode(err) != seckill.EINVALID {
				t.Fatalf("Validate: %v", err)
			}
			return
		}
		if !seckill.ValidSaleID(sale.ID) || sale.Stock < 1 || sale.Stock > seckill.MaxSaleStock ||
			sale.PurchaseLimit < 1 || sale.PurchaseLimit > seckill.MaxPurchaseLimit ||
			sale.PriceCents < 0 || sale.PriceCents > seckill.MaxPriceCents ||
			!utf8.ValidString(sale.Name) || len(sale.Name) > seckill.MaxSaleNameBytes || !sale.EndAt.After(sale.StartAt) {
			t.Fatalf("validated sale out of range: %+v", sale)
		}
		if _, err := json.Marshal(sale); err != nil {
			t.Fatalf("validated sale does not marshal: %v", err)
		}
	})
}

// FuzzIdempotencyKey: header values (one per line) never panic the
// check; only a single value of 1-128 printable ASCII bytes is accepted,
// exactly as the stock store validates it.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"k-1", "", "a\nb", strings.Repeat("~", 128), strings.Repeat("k", 129), "ключ", "a b", "a\x00b", "\x7f", "2c5ea4c0-4067-11e9-8bad-9b1deb4d3b7d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		h := http.Header{}
		h["Idempotency-Key"] = strings.Split(raw, "\n")
		key, err := idempotencyKey(h)
		if err != nil {
			if key != "" || seckill.ErrorCode(err) != seckill.EINVALID {
				t.Fatalf("idempotencyKey(%q) = %q, %v", raw, key, err)
			}
			return
		}
		if len(h["Idempotency-Key"]) != 1 || key != raw || !seckill.ValidIdempotencyKey(key) {
			t.Fatalf("accepted %q from %q", key, raw)
		}
		for i := 0; i < len(key); i++ {
			if key[i] <= ' ' || key[i] >= 0x7f {
				t.Fatalf("accepted byte %#x in %q", key[i], key)
			}
		}
		if len(key) > seckill.MaxIdempotencyKeyBytes {
			t.Fatalf("accepted a key of %d bytes", len(key))
		}
	})
}

// FuzzBuyerToken: no token panics the verifier (jwt.Verify) or the API's
// reading of the Authorization header; every failure is unauthorized;
// every accepted token is HS256 with a usable subject.
func FuzzBuyerToken(f *testing.F) {
	secret := testSecret
	now := time.Now()
	good, err := jwt.Sign(secret, "alice", time.Hour, now)
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	hs512, _ := gojwt.NewWithClaims(gojwt.SigningMethodHS512, gojwt.MapClaims{"sub": "bob", "exp": now.Add(time.Hour).Unix()}).SignedString(secret)
	for _, s := range []string{
		good, hs512, "", ".", "..", "a.b.c", parts[0] + "." + parts[1] + ".",
		b64([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".",
		b64([]byte(`{"alg":"HS256","typ":"JWT","kid":"../../etc/passwd"}`)) + "." + parts[1] + "." + parts[2],
		parts[0] + "." + b64([]byte(`{"sub":"a\u0000b","exp":1e300}`)) + "." + parts[2],
		strings.Repeat("A", jwt.MaxTokenBytes+1),
	} {
		f.Add(s)
	}
	v := jwt.NewVerifier(secret)
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, tok string) {
		uid, err := v.Verify(tok)
		if err != nil {
			if uid != "" || seckill.ErrorCode(err) != seckill.EUNAUTHORIZED {
				t.Fatalf("Verify(%q) = %q, %v; want an unauthorized error", tok, uid, err)
			}
		} else {
			if !seckill.ValidUserID(uid) {
				t.Fatalf("Verify(%q) accepted user id %q", tok, uid)
			}
			head, _, _ := strings.Cut(tok, ".")
			raw, derr := base64.RawURLEncoding.DecodeString(head)
			var h struct {
				Alg string `json:"alg"`
			}
			if derr != nil || json.Unmarshal(raw, &h) != nil || h.Alg != "HS256" {
				t.Fatalf("Verify accepted a token whose header is %q", raw)
			}
		}
		r, rerr := http.NewRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", http.NoBody)
		if rerr != nil {
			t.Fatal(rerr)
		}
		r.Header["Authorization"] = []string{"Bearer " + tok}
		got, gerr := e.srv.buyer(r)
		if (gerr == nil) != (err == nil) && strings.TrimLeft(tok, " ") == tok {
			t.Fatalf("buyer() = %q, %v; Verify = %q, %v", got, gerr, uid, err)
		}
		if gerr != nil && seckill.ErrorCode(gerr) != seckill.EUNAUTHORIZED {
			t.Fatalf("buyer(): %v", gerr)
		}
	})
}

// FuzzPathIDs: sale and reservation ids from the path never panic the
// parsers or the routes; what passes as a sale id is safe inside a Redis
// hash tag, a URL and a log line; the routes answer it with a 2xx or 4xx.
func FuzzPathIDs(f *testing.F) {
	for _, s := range []string{
		testSaleID, "a", strings.Repeat("z", 64), strings.Repeat("z", 65), "a{b}", "a/b", "a.b", "..", "%00", "\x00",
		"ça", "tea\n", seckill.NewReservationID(testSaleID, time.Now()), "x.0123456789ABCDEFGHJKMNPQRS", "x.0123456789abcdefghjkmnpqrs",
	} {
		f.Add(s)
	}
	e := newEnv(f)
	e.sales.Put(testSale())
	tok := "Bearer " + buyerToken(f, "fuzz")
	f.Fuzz(func(t *testing.T, id string) {
		if seckill.ValidSaleID(id) {
			if len(id) < 1 || len(id) > 64 || strings.ContainsAny(id, "{}/.: \t\r\n%") || url.PathEscape(id) != id {
				t.Fatalf("ValidSaleID accepted %q", id)
			}
		}
		if sale, ok := seckill.SaleIDOfReservation(id); ok {
			if !seckill.ValidSaleID(sale) || id != sale+id[len(sale):] || len(id)-len(sale) != 27 || id[len(sale)] != '.' {
				t.Fatalf("SaleIDOfReservation(%q) = %q", id, sale)
			}
		}
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/sales/" + url.PathEscape(id), ""},
			{"POST", "/api/v1/sales/" + url.PathEscape(id) + "/reservations", `{"qty":1}`},
			{"GET", "/admin/v1/sales/" + url.PathEscape(id), ""},
		} {
			r, err := http.NewRequest(rt.method, rt.path, strings.NewReader(rt.body))
			if err != nil {
				continue
			}
			r.RequestURI = r.URL.RequestURI()
			if strings.HasPrefix(rt.path, "/admin") {
				r.Header.Set("Authorization", admin())
			} else {
				r.Header.Set("Authorization", tok)
			}
			w := serve(e.h, r)
			if w.Code >= 500 || w.Code < 200 {
				t.Fatalf("%s %s: %d %s", rt.method, rt.path, w.Code, w.Body)
			}
			if w.Code < 300 && !seckill.ValidSaleID(id) {
				t.Fatalf("%s %s: %d for an invalid sale id", rt.method, rt.path, w.Code)
			}
		}
	})
}
