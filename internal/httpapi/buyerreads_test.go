package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestBuyerRecordRequestsAreBounded: one buyer's requests for their own
// records (a reservation's status, pay, cancel and reservations/mine)
// share one budget; past it they are answered 429 with a Retry-After
// before any store is asked, made-up ids included, while another buyer
// is untouched; the budget refills with time.
func TestBuyerRecordRequestsAreBounded(t *testing.T) {
	limit := seckill.RateLimit{Rate: 4, Period: time.Minute} // a burst of 4, then one each 15 s
	bc := &fakeBuyerClaims{}
	e := newResEnv(t, func(c *Config) { c.BuyerReadLimit, c.BuyerClaims = limit, bc })
	e.sales.Put(testSale())
	mine := func(user string) req {
		return req{method: "GET", path: "/api/v1/sales/" + testSaleID + "/reservations/mine", auth: "Bearer " + buyerToken(t, user)}
	}

	// The burst, spent on each route once.
	if w := e.get("alice", e.ordered); w.Code != http.StatusOK {
		t.Fatalf("status: %d %s", w.Code, w.Body)
	}
	if w := e.post("alice", e.ordered, "pay", ""); w.Code != http.StatusOK {
		t.Fatalf("pay: %d %s", w.Code, w.Body)
	}
	if w := e.get("alice", e.missing); w.Code != http.StatusNotFound {
		t.Fatalf("a made-up id: %d %s", w.Code, w.Body)
	}
	if w := e.do(mine("alice")); w.Code != http.StatusOK {
		t.Fatalf("reservations/mine: %d %s", w.Code, w.Body)
	}

	before := e.storeCalls()
	for _, w := range []*httptest.ResponseRecorder{
		e.get("alice", e.ordered),
		e.get("alice", e.missing),
		e.post("alice", e.paid, "cancel", ""),
		e.post("alice", e.ordered, "pay", ""),
		e.do(mine("alice")),
	} {
		wantError(t, w, http.StatusTooManyRequests, seckill.ERATELIMITED)
		if n, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || n < 1 || n > 15 {
			t.Fatalf("Retry-After = %q; want whole seconds from 1 to 15", w.Header().Get("Retry-After"))
		}
	}
	if n := e.storeCalls() - before; n != 0 {
		t.Fatalf("%d store calls for refused requests", n)
	}

	if w := e.get("bob", e.missing); w.Code != http.StatusNotFound {
		t.Fatalf("another buyer: %d %s; want the usual 404", w.Code, w.Body)
	}
	e.clock.Advance(15 * time.Second)
	if w := e.get("alice", e.ordered); w.Code != http.StatusOK {
		t.Fatalf("after one interval: %d %s; want 200", w.Code, w.Body)
	}
	wantError(t, e.get("alice", e.ordered), http.StatusTooManyRequests, seckill.ERATELIMITED)

	assertMetric(t, e.env, `seckill_buyer_reads_refused_total 6`)
	assertMetric(t, e.env, `seckill_reservation_polls_total{status="rate_limited"} 3`)
	assertMetric(t, e.env, `seckill_order_actions_total{action="pay",result="rate_limited"} 1`)
}

// TestBuyerRecordRequestsUnbounded: with no BuyerReadLimit (the Config's
// zero), a buyer's record requests are all answered.
func TestBuyerRecordRequestsUnbounded(t *testing.T) {
	e := newResEnv(t)
	for i := range 3 * DefaultBuyerReadLimit.Rate {
		if w := e.get("alice", e.ordered); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
}

// TestAdmissionStandingsShareTheBuyersBudget: a lottery's entries/mine and
// a waiting room's queue/mine count against the same budget as the
// buyer's reservations, and past it are refused before the stock store is
// asked.
func TestAdmissionStandingsShareTheBuyersBudget(t *testing.T) {
	e, calls, _ := admissionEnv(t, func(c *Config) { c.BuyerReadLimit = seckill.RateLimit{Rate: 2, Period: time.Minute} })
	if w := e.post("dora", "/api/v1/sales/"+testQueueID+"/queue", nil); w.Code != http.StatusOK {
		t.Fatalf("join: %d %s", w.Code, w.Body)
	}
	get := func(path string) *httptest.ResponseRecorder {
		return e.do(req{method: "GET", path: path, auth: "Bearer " + buyerToken(t, "dora")})
	}
	entry, place := "/api/v1/sales/"+testLotteryID+"/entries/mine", "/api/v1/sales/"+testQueueID+"/queue/mine"
	// Within the budget each is answered from the stock store (dora has
	// no entry: the store says so).
	wantError(t, get(entry), http.StatusNotFound, seckill.ENOTFOUND)
	if w := get(place); w.Code != http.StatusOK {
		t.Fatalf("queue/mine: %d %s", w.Code, w.Body)
	}
	before := calls.snapshot()
	for _, path := range []string{entry, place} {
		wantError(t, get(path), http.StatusTooManyRequests, seckill.ERATELIMITED)
	}
	if got := calls.since(before); len(got) != 0 {
		t.Fatalf("refused standings called %v", got)
	}
	assertMetric(t, e, `seckill_buyer_reads_refused_total 2`)
}
