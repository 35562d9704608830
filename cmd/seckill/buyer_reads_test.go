package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestBuyerReadLimitWired: --buyer-read-limit reaches the API. With a
// budget of 3 a minute, a buyer's own claim is answered three times (its
// status and reservations/mine share the budget) and then refused 429
// with a Retry-After, while another buyer's first request is answered.
func TestBuyerReadLimitWired(t *testing.T) {
	e := startEngine(t, func(c *Config) { c.BuyerReadLimit = "3/1m" })
	sale := e.liveSale(10, 1)
	tok := e.token("reader")
	r := e.reserve(sale, tok, 1, "")
	id, _ := r.body["reservation_id"].(string)
	if r.status != http.StatusAccepted || id == "" {
		t.Fatalf("claim: %d %v", r.status, r.body)
	}
	for i, path := range []string{"/api/v1/reservations/" + id, "/api/v1/sales/" + sale + "/reservations/mine", "/api/v1/reservations/" + id} {
		if r := e.do("GET", path, tok, nil); r.status != http.StatusOK {
			t.Fatalf("request %d, %s: %d %v", i, path, r.status, r.body)
		}
	}
	r = e.do("GET", "/api/v1/reservations/"+id, tok, nil)
	if code, _ := r.body["error"].(map[string]any); r.status != http.StatusTooManyRequests || code["code"] != seckill.ERATELIMITED || r.header.Get("Retry-After") == "" {
		t.Fatalf("the fourth: %d %v %v; want 429 rate_limited with a Retry-After", r.status, r.body, r.header)
	}
	other := seckill.NewReservationID(sale, time.Now())
	if r := e.do("GET", "/api/v1/reservations/"+other, e.token("someone-else"), nil); r.status != http.StatusNotFound {
		t.Fatalf("another buyer: %d %v; want the usual 404", r.status, r.body)
	}
}
