package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
)

func TestReserveAccepted(t *testing.T) {
	e := newEnv(t)
	w := e.reserve("alice", testSaleID, `{"qty":1}`, map[string][]string{"Idempotency-Key": {"k-1"}})
	var got acceptedResponse
	decode(t, w, http.StatusAccepted, &got)

	call := e.reserver.last(t)
	if call.saleID != testSaleID || call.req.UserID != "alice" || call.req.Qty != 1 || call.req.IdempotencyKey != "k-1" {
		t.Fatalf("reserver got %+v, want sale %s, user alice, qty 1, key k-1", call, testSaleID)
	}
	if sale, ok := seckill.SaleIDOfReservation(call.req.ReservationID); !ok || sale != testSaleID {
		t.Fatalf("proposed reservation id %q is not a reservation id of %s", call.req.ReservationID, testSaleID)
	}
	want := acceptedResponse{
		ReservationID: call.req.ReservationID,
		Status:        "pending",
		PollURL:       "/api/v1/reservations/" + call.req.ReservationID,
	}
	if got != want {
		t.Fatalf("answer = %+v, want %+v", got, want)
	}
	// The hot path reads no sale row.
	if n := e.sales.SaleCalls.Load(); n != 0 {
		t.Fatalf("sale store read %d times on a successful reservation, want 0", n)
	}
}

func TestReserveFreshIDPerRequest(t *testing.T) {
	e := newEnv(t)
	e.reserve("alice", testSaleID, `{"qty":1}`, nil)
	first := e.reserver.last(t).req.ReservationID
	e.reserve("alice", testSaleID, `{"qty":1}`, nil)
	if second := e.reserver.last(t).req.ReservationID; second == first {
		t.Fatalf("two requests proposed the same reservation id %q", first)
	}
}

func TestReserveReplayReturnsSameAnswer(t *testing.T) {
	e := newEnv(t)
	// The stock store remembers the first reservation per key and replays it.
	byKey := map[string]string{}
	e.reserver.set(func(_ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
		if id, ok := byKey[r.UserID+"/"+r.IdempotencyKey]; ok {
			return seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: id, Qty: r.Qty}, nil
		}
		byKey[r.UserID+"/"+r.IdempotencyKey] = r.ReservationID
		return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
	})
	key := map[string][]string{"Idempotency-Key": {"order-7f3a"}}
	first := e.reserve("alice", testSaleID, `{"qty":1}`, key)
	second := e.reserve("alice", testSaleID, `{"qty":1}`, key)
	if first.Code != http.StatusAccepted || second.Code != http.StatusAccepted {
		t.Fatalf("statuses = %d, %d; want 202, 202", first.Code, second.Code)
	}
	if first.Body.String() != second.Body.String() {
		t.Fatalf("replay answered %s, first answer was %s", second.Body, first.Body)
	}
	if e.reserver.count() != 2 {
		t.Fatalf("reserver calls = %d, want 2 (replay is the stock store's decision)", e.reserver.count())
	}
}

func TestReserveOutcomes(t *testing.T) {
	cases := []struct {
		outcome seckill.Outcome
		status  int
		code    string
	}{
		{seckill.OutcomeSoldOut, http.StatusConflict, seckill.ESOLDOUT},
		{seckill.OutcomeLimitExceeded, http.StatusConflict, seckill.EPURCHASELIMIT},
		{seckill.OutcomeEnded, http.StatusConflict, seckill.EENDED},
		{seckill.OutcomeKeyReused, http.StatusUnprocessableEntity, seckill.EKEYREUSED},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			e := newEnv(t)
			e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
				return seckill.ReserveResult{Outcome: c.outcome}, nil
			})
			wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), c.status, c.code)
			if n := e.sales.SaleCalls.Load(); n != 0 {
				t.Fatalf("sale store read %d times, want 0", n)
			}
			assertMetric(t, e, `seckill_reservations_total{outcome="`+c.code+`"} 1`)
		})
	}
}

// TestEarlyClaimsAnsweredFromMemory: once the stock store said a sale has
// not started, the node answers its claims "not started" with no
// stock-store call, for at most seckill.EarlyLapse at a time, until the
// sale changes, and never within seckill.EarlyMargin of the start, when
// every claim asks the store again. Before, each early claim was a
// stock-store call.
func TestEarlyClaimsAnsweredFromMemory(t *testing.T) {
	e := newEnv(t)
	e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{Outcome: seckill.OutcomeNotStarted}, nil
	})
	sale := testSale()
	e.sales.Put(sale)
	claims := func(n int) {
		t.Helper()
		for range n {
			wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusConflict, seckill.ENOTSTARTED)
		}
	}
	claims(20)
	if n := e.reserver.count(); n != 1 {
		t.Fatalf("stock-store calls for 20 early claims = %d, want 1", n)
	}
	e.clock.Advance(seckill.EarlyLapse)
	claims(5)
	if n := e.reserver.count(); n != 2 {
		t.Fatalf("stock-store calls once the lapse is over = %d, want 2", n)
	}
	e.srv.ForgetSale(testSaleID) // changed (its start may have moved): ask again
	claims(1)
	if n := e.reserver.count(); n != 3 {
		t.Fatalf("stock-store calls once the sale changed = %d, want 3", n)
	}
	e.clock.Set(sale.StartAt.Add(-seckill.EarlyMargin))
	claims(5)
	if n := e.reserver.count(); n != 8 {
		t.Fatalf("stock-store calls within the margin before the start = %d, want 8 (every claim)", n)
	}
	// The store decides the start: a claim it takes is taken.
	e.reserver.set(nil)
	if w := e.reserve("bob", testSaleID, `{"qty":1}`, nil); w.Code != http.StatusAccepted {
		t.Fatalf("a claim the stock store takes, %s before the start = %d %s", seckill.EarlyMargin, w.Code, w.Body)
	}
	assertMetric(t, e, `seckill_reservations_total{outcome="not_started"} 31`)
}

func TestReserveNotStarted(t *testing.T) {
	notStarted := func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{Outcome: seckill.OutcomeNotStarted}, nil
	}
	t.Run("unknown sale", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		wantError(t, e.reserve("bob", "no-such-sale", `{"qty":1}`, nil), http.StatusNotFound, seckill.ESALENOTFOUND)
		assertMetric(t, e, `seckill_reservations_total{outcome="sale_not_found"} 1`)
	})
	t.Run("scheduled sale", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		e.sales.Put(testSale())
		wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusConflict, seckill.ENOTSTARTED)
	})
	t.Run("sale started but not loaded yet", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		e.sales.Put(testSale())
		e.clock.Set(testSale().StartAt)
		w := e.reserve("bob", testSaleID, `{"qty":1}`, nil)
		wantError(t, w, http.StatusServiceUnavailable, seckill.ETRYLATER)
		if w.Header().Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		assertMetric(t, e, `seckill_reservations_total{outcome="try_later"} 1`)
	})
	t.Run("sale over but never loaded", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		e.sales.Put(testSale())
		e.clock.Set(testSale().EndAt)
		wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusConflict, seckill.EENDED)
	})
	t.Run("a flood of garbage ids reads each once per TTL", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		e.sales.Put(testSale())
		for range 50 {
			wantError(t, e.reserve("bob", "garbage-1", `{"qty":1}`, nil), http.StatusNotFound, seckill.ESALENOTFOUND)
			wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusConflict, seckill.ENOTSTARTED)
		}
		if n := e.sales.SaleCalls.Load(); n != 2 {
			t.Fatalf("sale store reads = %d, want 2 (one per id)", n)
		}
		e.clock.Advance(DefaultSaleCacheTTL)
		e.reserve("bob", "garbage-1", `{"qty":1}`, nil)
		if n := e.sales.SaleCalls.Load(); n != 3 {
			t.Fatalf("sale store reads after the TTL = %d, want 3", n)
		}
	})
	t.Run("sale store down", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(notStarted)
		e.sales.Err = errors.New("dial tcp 10.0.0.7:3306: connection refused")
		w := e.reserve("bob", testSaleID, `{"qty":1}`, nil)
		wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
		if strings.Contains(w.Body.String(), "10.0.0.7") {
			t.Fatalf("internal detail leaked to the client: %s", w.Body)
		}
	})
}

func TestReserveReserverErrors(t *testing.T) {
	t.Run("domain error keeps its code", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
			return seckill.ReserveResult{}, seckill.Errorf(seckill.EOVERLOADED, "Too busy; retry shortly.")
		})
		w := e.reserve("bob", testSaleID, `{"qty":1}`, nil)
		wantError(t, w, http.StatusServiceUnavailable, seckill.EOVERLOADED)
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After = %q, want 1", got)
		}
		if e.logs.String() != "" {
			t.Fatalf("a non-internal error was logged: %s", e.logs)
		}
	})
	t.Run("backend failure is internal, logged without secrets", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
			return seckill.ReserveResult{}, errors.New("redis: READONLY You can't write against a read only replica")
		})
		tok := buyerToken(t, "bob")
		w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations",
			body: `{"qty":1}`, auth: "Bearer " + tok, headers: map[string][]string{"Idempotency-Key": {"secret-key-1"}}})
		wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
		if strings.Contains(w.Body.String(), "READONLY") {
			t.Fatalf("internal detail leaked to the client: %s", w.Body)
		}
		logs := e.logs.String()
		if !strings.Contains(logs, "READONLY") {
			t.Fatalf("internal error not logged; logs: %q", logs)
		}
		if strings.Contains(logs, tok) || strings.Contains(logs, testAdminToken) {
			t.Fatalf("a token reached the log: %q", logs)
		}
		assertMetric(t, e, `seckill_reservations_total{outcome="error"} 1`)
	})
	t.Run("claimed without id", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
			return seckill.ReserveResult{Outcome: seckill.OutcomeReserved}, nil
		})
		wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusInternalServerError, seckill.EINTERNAL)
	})
	t.Run("unknown outcome", func(t *testing.T) {
		e := newEnv(t)
		e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
			return seckill.ReserveResult{Outcome: 99}, nil
		})
		wantError(t, e.reserve("bob", testSaleID, `{"qty":1}`, nil), http.StatusInternalServerError, seckill.EINTERNAL)
	})
	t.Run("client gone is not logged", func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
			cancel()
			return seckill.ReserveResult{}, context.Canceled
		})
		r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", `{"qty":1}`).WithContext(ctx)
		r.Header.Set("Authorization", "Bearer "+buyerToken(t, "bob"))
		w := serve(e.h, r)
		if w.Body.Len() != 0 {
			t.Fatalf("answered a gone client: %d %s", w.Code, w.Body)
		}
		if e.logs.String() != "" {
			t.Fatalf("a hang-up was logged: %s", e.logs)
		}
		assertMetric(t, e, `seckill_reservations_total{outcome="canceled"} 1`)
	})
}

// TestReserveRejectsBadInput sends bad bodies, headers and paths; each must
// be answered with the error shape and must never reach the reserver.
func TestReserveRejectsBadInput(t *testing.T) {
	big := `{"qty":1,"pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	cases := []struct {
		name    string
		path    string // default: the test sale's reservations
		body    string
		headers map[string][]string
		status  int
		code    string
	}{
		{name: "no body", body: "", status: 400, code: seckill.EINVALID},
		{name: "empty object", body: `{}`, status: 400, code: seckill.EINVALID},
		{name: "null", body: `null`, status: 400, code: seckill.EINVALID},
		{name: "qty null", body: `{"qty":null}`, status: 400, code: seckill.EINVALID},
		{name: "malformed", body: `{"qty":1`, status: 400, code: seckill.EINVALID},
		{name: "not json", body: `qty=1`, status: 400, code: seckill.EINVALID},
		{name: "array", body: `[{"qty":1}]`, status: 400, code: seckill.EINVALID},
		{name: "unknown field", body: `{"qty":1,"user_id":"mallory"}`, status: 400, code: seckill.EINVALID},
		{name: "trailing object", body: `{"qty":1}{"qty":1}`, status: 400, code: seckill.EINVALID},
		{name: "trailing garbage", body: `{"qty":1} x`, status: 400, code: seckill.EINVALID},
		{name: "qty string", body: `{"qty":"1"}`, status: 400, code: seckill.EINVALID},
		{name: "qty float", body: `{"qty":1.5}`, status: 400, code: seckill.EINVALID},
		{name: "qty exponent", body: `{"qty":1e0}`, status: 400, code: seckill.EINVALID},
		{name: "qty bool", body: `{"qty":true}`, status: 400, code: seckill.EINVALID},
		{name: "qty 0", body: `{"qty":0}`, status: 400, code: seckill.EINVALID},
		{name: "qty -1", body: `{"qty":-1}`, status: 400, code: seckill.EINVALID},
		{name: "qty over max", body: `{"qty":` + strconv.Itoa(seckill.MaxPurchaseLimit+1) + `}`, status: 400, code: seckill.EINVALID},
		{name: "qty max int64", body: `{"qty":9223372036854775807}`, status: 400, code: seckill.EINVALID},
		{name: "qty overflow", body: `{"qty":99999999999999999999999}`, status: 400, code: seckill.EINVALID},
		{name: "over 8 KiB", body: big, status: 413, code: seckill.ETOOLARGE},
		{name: "over 8 KiB of trailing space", body: `{"qty":1}` + strings.Repeat(" ", MaxBodyBytes), status: 413, code: seckill.ETOOLARGE},
		{name: "content type", body: `{"qty":1}`, headers: map[string][]string{"Content-Type": {"text/plain"}}, status: 400, code: seckill.EINVALID},
		{name: "key too long", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {strings.Repeat("k", seckill.MaxIdempotencyKeyBytes+1)}}, status: 400, code: seckill.EINVALID},
		{name: "key non-ascii", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"ключ"}}, status: 400, code: seckill.EINVALID},
		{name: "key control", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\x01b"}}, status: 400, code: seckill.EINVALID},
		{name: "key empty", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {""}}, status: 400, code: seckill.EINVALID},
		{name: "two keys", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a", "b"}}, status: 400, code: seckill.EINVALID},
		{name: "bad sale id", path: "/api/v1/sales/bad%7Bid%7D/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id too long", path: "/api/v1/sales/" + strings.Repeat("a", 65) + "/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			path := c.path
			if path == "" {
				path = "/api/v1/sales/" + testSaleID + "/reservations"
			}
			w := e.do(req{method: "POST", path: path, body: c.body, auth: "Bearer " + buyerToken(t, "bob"), headers: c.headers})
			wantError(t, w, c.status, c.code)
			if n := e.reserver.count(); n != 0 {
				t.Fatalf("the reserver was called %d times for rejected input", n)
			}
		})
	}
}

func TestReserveAcceptsTolerableInput(t *testing.T) {
	for name, c := range map[string]struct {
		body    string
		headers map[string][]string
	}{
		"no content type":     {`{"qty":2}`, nil},
		"json with charset":   {`{"qty":2}`, map[string][]string{"Content-Type": {"application/json; charset=utf-8"}}},
		"surrounding space":   {"\n {\"qty\": 2} \r\n", nil},
		"max key":             {`{"qty":2}`, map[string][]string{"Idempotency-Key": {strings.Repeat("~", seckill.MaxIdempotencyKeyBytes)}}},
		"uuid key":            {`{"qty":2}`, map[string][]string{"Idempotency-Key": {"2c5ea4c0-4067-11e9-8bad-9b1deb4d3b7d"}}},
		"lowercase auth type": {`{"qty":2}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			auth := "Bearer " + buyerToken(t, "bob")
			if name == "lowercase auth type" {
				auth = "bearer " + buyerToken(t, "bob")
			}
			w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: c.body, auth: auth, headers: c.headers})
			if w.Code != http.StatusAccepted {
				t.Fatalf("status = %d, want 202; body %s", w.Code, w.Body)
			}
			if got := e.reserver.last(t).req.Qty; got != 2 {
				t.Fatalf("qty = %d, want 2", got)
			}
		})
	}
}

func TestReserveAuth(t *testing.T) {
	now := time.Now()
	claims := gojwt.MapClaims{"sub": "bob", "exp": now.Add(time.Hour).Unix()}
	sign := func(m gojwt.SigningMethod, key any, c gojwt.Claims) string {
		s, err := gojwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := sign(gojwt.SigningMethodHS256, testSecret, claims)
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	expired, err := jwt.Sign(testSecret, "bob", time.Minute, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]string{
		"missing":          "",
		"basic scheme":     "Basic Ym9iOnB3",
		"bearer no token":  "Bearer ",
		"garbage":          "Bearer not.a.jwt",
		"forged signature": "Bearer " + parts[0] + "." + b64([]byte(`{"sub":"alice","exp":`+strconv.FormatInt(now.Add(time.Hour).Unix(), 10)+`}`)) + "." + parts[2],
		"expired":          "Bearer " + expired,
		"alg none":         "Bearer " + b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
		"alg none library": "Bearer " + sign(gojwt.SigningMethodNone, gojwt.UnsafeAllowNoneSignatureType, claims),
		"HS512":            "Bearer " + sign(gojwt.SigningMethodHS512, testSecret, claims),
		"other secret":     "Bearer " + sign(gojwt.SigningMethodHS256, []byte("some-other-secret-0123456789abcdef"), claims),
		"no exp":           "Bearer " + sign(gojwt.SigningMethodHS256, testSecret, gojwt.MapClaims{"sub": "bob"}),
		"no sub":           "Bearer " + sign(gojwt.SigningMethodHS256, testSecret, gojwt.MapClaims{"exp": now.Add(time.Hour).Unix()}),
		"admin token":      admin(),
	}
	for name, auth := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`, auth: auth})
			wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
			if n := e.reserver.count(); n != 0 {
				t.Fatalf("the reserver was called %d times without a valid token", n)
			}
			assertMetric(t, e, `seckill_reservations_total{outcome="unauthorized"} 1`)
			if e.logs.String() != "" {
				t.Fatalf("an auth failure was logged: %s", e.logs)
			}
		})
	}
	// The control: the untampered token works.
	e := newEnv(t)
	if w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`, auth: "Bearer " + good}); w.Code != http.StatusAccepted {
		t.Fatalf("control token: status %d, body %s", w.Code, w.Body)
	}
}

// A verifier other than ours returning a plain error, or a bad user id,
// still yields a 401 and no reservation.
type laxVerifier struct {
	uid string
	err error
}

func (v laxVerifier) Verify(string) (string, error) { return v.uid, v.err }

func TestReserveDistrustsVerifier(t *testing.T) {
	for name, v := range map[string]laxVerifier{
		"plain error":     {err: errors.New("jwks fetch failed")},
		"empty user":      {uid: ""},
		"control in user": {uid: "bob\nadmin"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Verifier = v })
			w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`, auth: "Bearer x"})
			wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
			if e.reserver.count() != 0 {
				t.Fatal("reserved with an untrusted identity")
			}
		})
	}
}

func TestWriteAcceptedFastPathMatchesEncodingJSON(t *testing.T) {
	for _, id := range []string{
		seckill.NewReservationID(testSaleID, t0),
		seckill.NewReservationID(strings.Repeat("z", 64), t0),
		`odd"id/with\stuff`, // not one of ours: slow path
		"ünïcode",
	} {
		w := newRecorder()
		writeAccepted(w, id)
		want, err := marshalAccepted(id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Body.String() != string(want) {
			t.Errorf("id %q: body %s, want %s", id, w.Body, want)
		}
		var got acceptedResponse
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.ReservationID != id {
			t.Errorf("id %q: body %s does not round-trip: %+v %v", id, w.Body, got, err)
		}
	}
}

func BenchmarkReserve(b *testing.B) {
	e := newEnv(b, func(c *Config) { c.Reserver = echoReserver{} })
	benchReservations(b, e, "Bearer "+buyerToken(b, "bench-user"), http.StatusAccepted)
}

// benchReservations posts one-unit reservations with the token tok to e's
// handler from b's parallel goroutines; an answer whose status is not one
// of want fails b.
func benchReservations(b *testing.B, e *env, tok string, want ...int) {
	path := "/api/v1/sales/" + testSaleID + "/reservations"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := newRequest("POST", path, `{"qty":1}`)
			r.Header.Set("Authorization", tok)
			w := newRecorder()
			e.h.ServeHTTP(w, r)
			if !slices.Contains(want, w.Code) {
				b.Errorf("status %d", w.Code)
				return
			}
		}
	})
}

// echoReserver reserves everything and records nothing: for benchmarks.
type echoReserver struct{}

func (echoReserver) Reserve(_ context.Context, _ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
}

// TestReservationFrontMatchesMux: the reservation route served in front of
// the mux answers every request as the mux's route would (status, body,
// the sale the Reserver is asked about), and takes only the plain path:
// escaped, odd or other-method paths go the long way.
func TestReservationFrontMatchesMux(t *testing.T) {
	var asked []string
	e := newEnv(t, func(c *Config) {
		c.Reserver = saleRecorder(func(saleID string) { asked = append(asked, saleID) })
	})
	tok := "Bearer " + buyerToken(t, "ann")
	longWay := Harden(e.srv.mux)
	for _, tc := range []struct {
		method, path string
		front        bool // answered in front of the mux, without next
	}{
		{"POST", "/api/v1/sales/" + testSaleID + "/reservations", true},
		{"POST", "/api/v1/sales/Sale_1-x/reservations", true},
		{"POST", "/api/v1/sales/%74est/reservations", false}, // escaped: the mux unescapes it
		{"POST", "/api/v1/sales/x%2Fy/reservations", false},  // an escaped slash in the id
		{"POST", "/api/v1/sales/a.b/reservations", false},    // not a sale id
		{"POST", "/api/v1/sales/../reservations", true},      // not canonical: Harden refuses it
		{"POST", "/api/v1/sales//reservations", true},        // empty id: Harden refuses it
		{"POST", "/api/v1/sales/x/reservations/", false},     // another path
		{"POST", "/api/v1/sales/x/y/reservations", false},    // two segments
		{"GET", "/api/v1/sales/" + testSaleID + "/reservations", false},
		{"PUT", "/api/v1/sales/" + testSaleID + "/reservations", false},
		{"POST", "/api/v1/sales/" + strings.Repeat("s", 65) + "/reservations", false},
	} {
		answer := func(h http.Handler) (int, string, []string) {
			asked = nil
			r := newRequest(tc.method, tc.path, `{"qty":1}`)
			r.Header.Set("Authorization", tok)
			w := newRecorder()
			h.ServeHTTP(w, r)
			return w.Code, w.Body.String(), asked
		}
		nexts := 0
		front := e.srv.Front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			nexts++
			e.srv.mux.ServeHTTP(w, r)
		}))
		gotStatus, gotBody, gotAsked := answer(front)
		wantStatus, wantBody, wantAsked := answer(longWay)
		if gotStatus != wantStatus || gotBody != wantBody || strings.Join(gotAsked, ",") != strings.Join(wantAsked, ",") {
			t.Errorf("%s %s: front answered %d %s (asked %q), the mux %d %s (asked %q)",
				tc.method, tc.path, gotStatus, gotBody, gotAsked, wantStatus, wantBody, wantAsked)
		}
		if took := nexts == 0; took != tc.front {
			t.Errorf("%s %s: answered in front of the mux %v, want %v", tc.method, tc.path, took, tc.front)
		}
	}
}

// saleRecorder answers every reservation sold out, telling f the sale.
type saleRecorder func(saleID string)

func (f saleRecorder) Reserve(_ context.Context, saleID string, _ seckill.ReserveRequest) (seckill.ReserveResult, error) {
	f(saleID)
	return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
}

// flagAtReserver has a local sold-out flag that takes the request's time,
// as soldout.Gate's AnswerSoldOutAt does; flagOnlyReserver one that reads
// its own clock (AnswerSoldOut alone). Both say every sale is sold out and
// note when they were asked.
type flagAtReserver struct {
	fakeReserver
	mu    sync.Mutex
	asked []time.Time
}

func (f *flagAtReserver) AnswerSoldOutAt(_ string, now time.Time) bool {
	f.mu.Lock()
	f.asked = append(f.asked, now)
	f.mu.Unlock()
	return true
}

func (f *flagAtReserver) askedTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

type flagOnlyReserver struct {
	fakeReserver
	asked atomic.Int64
}

func (f *flagOnlyReserver) AnswerSoldOut(string) bool { f.asked.Add(1); return true }

// TestSoldOutFlagAfterAuth: the local sold-out flag is asked only for a
// request whose buyer token verified, so a missing, malformed or foreign
// token is answered 401 and never sold_out; a keyed request goes to the
// Reserver (it may be a replay). A flag that takes the request's time gets
// the route's one reading of the wall clock (the Server's Config.Now is a
// test clock here, far from it); one without it still answers. Both the
// front route and the mux's (an escaped path) behave alike.
func TestSoldOutFlagAfterAuth(t *testing.T) {
	at := &flagAtReserver{}
	only := &flagOnlyReserver{}
	for name, r := range map[string]interface {
		seckill.Reserver
		count() int
	}{"AnswerSoldOutAt": at, "AnswerSoldOut": only} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Reserver = r })
			asked := func() int {
				if r == at {
					return len(at.askedTimes())
				}
				return int(only.asked.Load())
			}
			other, err := jwt.Sign([]byte("another-secret-another-secret-!!"), "alice", time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			front := "/api/v1/sales/" + testSaleID + "/reservations"
			escaped := "/api/v1/sales/%74ea-2030/reservations" // the mux's route, same sale
			for _, path := range []string{front, escaped} {
				for _, auth := range []string{"", "Bearer ", "Bearer not-a-token", "Basic " + buyerToken(t, "alice"), "Bearer " + other} {
					w := e.do(req{method: "POST", path: path, body: `{"qty":1}`, auth: auth})
					wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
				}
				if n := asked(); n != 0 {
					t.Fatalf("%s: the flag was asked %d times for requests without a valid token", path, n)
				}
			}
			for i, path := range []string{front, escaped} {
				before := time.Now()
				w := e.do(req{method: "POST", path: path, body: `{"qty":1}`, auth: "Bearer " + buyerToken(t, "alice")})
				after := time.Now()
				wantError(t, w, http.StatusConflict, seckill.ESOLDOUT)
				if n := asked(); n != i+1 {
					t.Fatalf("%s: the flag was asked %d times in all, want %d", path, n, i+1)
				}
				if r == at {
					if got := at.askedTimes()[i]; got.Before(before) || got.After(after) {
						t.Fatalf("%s: the flag was asked at %v, want the request's wall-clock time in [%v, %v]", path, got, before, after)
					}
				}
			}
			if r.count() != 0 {
				t.Fatalf("the Reserver was called %d times; the flag answers", r.count())
			}
			w := e.do(req{method: "POST", path: front, body: `{"qty":1}`, auth: "Bearer " + buyerToken(t, "alice"),
				headers: map[string][]string{"Idempotency-Key": {"k1"}}})
			if w.Code != http.StatusAccepted || r.count() != 1 || asked() != 2 {
				t.Fatalf("keyed request: %d, %d Reserver calls, flag asked %d times; want 202 from the Reserver, the flag not asked", w.Code, r.count(), asked())
			}
			w = e.do(req{method: "POST", path: "/api/v1/sales/no%20such/reservations", body: `{"qty":1}`, auth: "Bearer " + buyerToken(t, "alice")})
			wantError(t, w, http.StatusNotFound, seckill.ESALENOTFOUND)
			if asked() != 2 {
				t.Fatal("the flag was asked for an invalid sale id")
			}
		})
	}
}

// keyedOrdersFunc is a KeyedOrders of a function.
type keyedOrdersFunc func(saleID, userID, digest string) (*seckill.Order, error)

func (f keyedOrdersFunc) OrderOfKey(_ context.Context, saleID, userID, digest string) (*seckill.Order, error) {
	return f(saleID, userID, digest)
}

// TestKeyedRetryOverTheLimitIsAnsweredWithTheOrder: the stock store forgot a
// key (its record was lost in a failover, the heal restored the buyer's
// count from the database) and refuses the retry as over the limit; the
// order the key made answers it instead: 202 with its reservation id for
// the same qty, key_reused for another, limit_exceeded as before for a key
// the database does not know, a request without a key, or a database that
// fails.
func TestKeyedRetryOverTheLimitIsAnsweredWithTheOrder(t *testing.T) {
	const held = testSaleID + ".06H4P8K0MWXF79V486A55RE4VM"
	var lookups int
	e := newEnv(t, func(c *Config) {
		c.KeyedOrders = keyedOrdersFunc(func(saleID, userID, digest string) (*seckill.Order, error) {
			lookups++
			switch {
			case saleID == testSaleID && userID == "alice" && digest == seckill.IdempotencyDigest("k-held"):
				return &seckill.Order{ReservationID: held, SaleID: saleID, UserID: userID, Qty: 2}, nil
			case digest == seckill.IdempotencyDigest("k-down"):
				return nil, errors.New("database down")
			}
			return nil, seckill.ErrNotFound
		})
	})
	e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{Outcome: seckill.OutcomeLimitExceeded}, nil
	})
	key := func(k string) map[string][]string { return map[string][]string{"Idempotency-Key": {k}} }

	w := e.reserve("alice", testSaleID, `{"qty":2}`, key("k-held"))
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"reservation_id":"`+held+`"`) {
		t.Fatalf("retry of the held key: %d %s; want 202 with %s", w.Code, w.Body, held)
	}
	wantError(t, e.reserve("alice", testSaleID, `{"qty":1}`, key("k-held")), http.StatusUnprocessableEntity, seckill.EKEYREUSED)
	wantError(t, e.reserve("bob", testSaleID, `{"qty":2}`, key("k-held")), http.StatusConflict, seckill.EPURCHASELIMIT)
	wantError(t, e.reserve("alice", testSaleID, `{"qty":2}`, key("k-other")), http.StatusConflict, seckill.EPURCHASELIMIT)
	wantError(t, e.reserve("alice", testSaleID, `{"qty":2}`, key("k-down")), http.StatusConflict, seckill.EPURCHASELIMIT)
	before := lookups
	wantError(t, e.reserve("alice", testSaleID, `{"qty":2}`, nil), http.StatusConflict, seckill.EPURCHASELIMIT)
	if lookups != before {
		t.Errorf("a request without a key looked up the database")
	}
	assertMetric(t, e, `seckill_reservations_total{outcome="replayed"} 1`)
	if !strings.Contains(e.logs.String(), "database down") || strings.Contains(e.logs.String(), "k-down") {
		t.Errorf("logs %q; want the database's failure, without the key", e.logs.String())
	}
}

// TestSoldOutIsNotLookedUp: only a refusal over the limit asks the
// database; a sold-out answer stays as cheap as it is.
func TestSoldOutIsNotLookedUp(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.KeyedOrders = keyedOrdersFunc(func(string, string, string) (*seckill.Order, error) {
			t.Error("the database was asked")
			return nil, seckill.ErrNotFound
		})
	})
	e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
	})
	wantError(t, e.reserve("alice", testSaleID, `{"qty":1}`, map[string][]string{"Idempotency-Key": {"k"}}), http.StatusConflict, seckill.ESOLDOUT)
}

// TestEnteredBodyIsEncodingJSONs: the appended answer to an entry is the
// bytes encoding/json makes of entryResponse, whatever the entry and the
// close time (a zone other than UTC, nanoseconds or none, an id that
// needs escaping, a year JSON cannot carry).
func TestEnteredBodyIsEncodingJSONs(t *testing.T) {
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		id string
		at time.Time
	}{
		{seckill.NewEntryID(), time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)},
		{seckill.NewEntryID(), time.Date(2026, 12, 6, 13, 0, 0, 123456789, berlin)},
		{seckill.NewEntryID(), time.Date(2026, 12, 6, 13, 0, 0, 120000000, time.UTC)},
		{`e"<odd>`, time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)},
		{seckill.NewEntryID(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		e := seckill.LotteryEntry{ID: tc.id, UserID: "u", Qty: 3}
		rec := httptest.NewRecorder()
		code := s.writeEntered(rec, httptest.NewRequest("POST", "/", nil), http.StatusCreated, e, tc.at)
		want, err := json.Marshal(entryResponse{EntryID: e.ID, Qty: e.Qty, Status: seckill.EntryEntered, ResultsAt: tc.at})
		if err != nil {
			if code != http.StatusInternalServerError {
				t.Errorf("%s at %s: %d, want 500 as json.Marshal fails (%v)", tc.id, tc.at, code, err)
			}
			continue
		}
		if code != http.StatusCreated || rec.Code != http.StatusCreated || rec.Body.String() != string(want)+"\n" {
			t.Errorf("%s at %s: %d %s, want 201 %s", tc.id, tc.at, rec.Code, rec.Body, want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
}

// TestStandingBodyIsEncodingJSONs: the appended answer of a join or a poll
// is the bytes encoding/json makes of queueResponse, with a ticket or
// without, and one that needs escaping.
func TestStandingBodyIsEncodingJSONs(t *testing.T) {
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	for _, resp := range []queueResponse{
		{Position: 1234, Ahead: 1200, ETASeconds: 120},
		{Position: 1, Admitted: true, Ticket: "1765000000.0a1b2c3d.4e5f6a7b.00ff", TicketHeader: ticketHeader},
		{Position: 9, SoldOut: true},
		{Position: 2, Admitted: true, Ticket: `odd"<ticket>`, TicketHeader: ticketHeader},
		{Position: -1, Ahead: -2, ETASeconds: 1 << 40},
	} {
		rec := httptest.NewRecorder()
		s.writeStanding(rec, httptest.NewRequest("GET", "/", nil), resp)
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusOK || rec.Body.String() != string(want)+"\n" {
			t.Errorf("%+v: %d %s, want 200 %s", resp, rec.Code, rec.Body, want)
		}
	}
}
