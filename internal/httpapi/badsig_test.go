package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
)

// forged is tok with its signature changed: what a client that makes up
// tokens sends.
func forged(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 1
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

// sendAs sends a reservation with the bearer token tok from the peer addr.
func (e *env) sendAs(addr, tok string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", `{"qty":1}`)
	r.RemoteAddr = addr
	r.Header.Set("Authorization", "Bearer "+tok)
	return serve(e.h, r)
}

// TestForgedTokensAreBoundedPerAddress: an address may send
// DefaultBadSignatureLimit's burst of tokens with a wrong signature, each
// answered 401 after its check; past it, a token this node has not
// verified before is answered 429 with a Retry-After and no check, while
// a buyer whose token was verified earlier from the same address still
// gets through. Other addresses are not touched, and refusals that cost
// no signature check (an expired token) are not counted.
func TestForgedTokensAreBoundedPerAddress(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BadSignatureLimit = DefaultBadSignatureLimit })
	const a, b, c = "198.51.100.7:40000", "203.0.113.9:40000", "192.0.2.44:40000"
	burst := DefaultBadSignatureLimit.Rate

	early := buyerToken(t, "early")
	if w := e.sendAs(a, early); w.Code != http.StatusAccepted {
		t.Fatalf("a buyer's first claim: %d %s", w.Code, w.Body)
	}
	for i := range burst {
		w := e.sendAs(a, forged(buyerToken(t, "mallory-"+strconv.Itoa(i))))
		wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	}
	for i := range 5 {
		w := e.sendAs(a, forged(buyerToken(t, "mallory-more-"+strconv.Itoa(i))))
		wantError(t, w, http.StatusTooManyRequests, seckill.ERATELIMITED)
		// Ten failures at once put the address's budget a Period ahead;
		// the next is admitted one interval (6 s) later.
		n, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || n < 1 || n > 6 {
			t.Fatalf("Retry-After = %q; want whole seconds from 1 to 6", w.Header().Get("Retry-After"))
		}
	}
	if w := e.sendAs(a, early); w.Code == http.StatusTooManyRequests || w.Code == http.StatusUnauthorized {
		t.Fatalf("a token verified before, from the refused address: %d %s; want it let through", w.Code, w.Body)
	}
	wantError(t, e.sendAs(a, buyerToken(t, "late")), http.StatusTooManyRequests, seckill.ERATELIMITED)

	wantError(t, e.sendAs(b, forged(buyerToken(t, "mallory-b"))), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	if w := e.sendAs(b, buyerToken(t, "late")); w.Code != http.StatusAccepted {
		t.Fatalf("another address's new buyer: %d %s; want 202", w.Code, w.Body)
	}

	expired, err := jwt.Sign(testSecret, "sleepy", time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 * burst {
		wantError(t, e.sendAs(c, expired), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	}
	wantError(t, e.sendAs(c, forged(buyerToken(t, "mallory-c"))), http.StatusUnauthorized, seckill.EUNAUTHORIZED)

	assertMetric(t, e, `seckill_bad_signature_tokens_total{outcome="counted"} `+strconv.Itoa(burst+2))
	assertMetric(t, e, `seckill_bad_signature_tokens_total{outcome="refused"} 6`)
}

// TestForgedTokensUnbounded: with no BadSignatureLimit (the Config's
// zero), forged tokens are all checked and answered 401, as before.
func TestForgedTokensUnbounded(t *testing.T) {
	e := newEnv(t)
	for i := range 3 * DefaultBadSignatureLimit.Rate {
		wantError(t, e.sendAs("198.51.100.7:40000", forged(buyerToken(t, "m-"+strconv.Itoa(i)))), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	}
}

// TestSigGateRefills: the gate's budget is GCRA's, per address (an IPv6
// /64), and comes back with time.
func TestSigGateRefills(t *testing.T) {
	g, err := newSigGate(seckill.RateLimit{Rate: 2, Period: time.Second}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	at := func(addr string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		return r
	}
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	ann, annToo, other := at("[2001:db8::1]:1"), at("[2001:db8::2]:1"), at("[2001:db8:0:1::1]:1")
	if _, refusing := g.refusing(ann, now); refusing {
		t.Fatal("refusing before any failure")
	}
	g.failed(ann, now)
	if _, refusing := g.refusing(ann, now); refusing {
		t.Fatal("refusing after one failure of a burst of two")
	}
	g.failed(annToo, now) // the same /64
	for _, c := range []struct {
		r       *http.Request
		at      time.Duration
		refused bool
		retry   time.Duration
	}{
		{ann, 0, true, 500 * time.Millisecond},
		{annToo, 0, true, 500 * time.Millisecond},
		{other, 0, false, 0},
		{ann, 499 * time.Millisecond, true, time.Millisecond},
		{ann, 500 * time.Millisecond, false, 0},
	} {
		retry, refused := g.refusing(c.r, now.Add(c.at))
		if refused != c.refused || retry != c.retry {
			t.Fatalf("%s at +%v: refusing = %v, %v; want %v, %v", c.r.RemoteAddr, c.at, retry, refused, c.refused, c.retry)
		}
	}
	// A failure while refused changes nothing: the wait does not grow.
	g.failed(ann, now.Add(100*time.Millisecond))
	if retry, refused := g.refusing(ann, now.Add(100*time.Millisecond)); !refused || retry != 400*time.Millisecond {
		t.Fatalf("after a failure while refused: %v, %v; want refused for 400ms", retry, refused)
	}
	// Once nobody is refused, the check is the atomic load alone.
	if g.bad.refused.ns.Load() != now.Add(500*time.Millisecond).UnixNano() {
		t.Fatalf("until = %v; want +500ms", time.Unix(0, g.bad.refused.ns.Load()).Sub(now))
	}
}
