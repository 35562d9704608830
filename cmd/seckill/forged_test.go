package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestForgedTokensBoundedOnPagesToo: the buyer pages check the session
// cookie's token through the API's check, so forged tokens sent as the
// cookie count against the address's bound as bearer tokens do: after the
// bound's burst of forged cookies (10, the default), a new token from the
// same address is refused 429 by the API unchecked, while a buyer whose
// token was verified before still gets through.
func TestForgedTokensBoundedOnPagesToo(t *testing.T) {
	e := startWebEngine(t)
	sale := e.liveSale(10, 1)
	known := e.token("early")
	if r := e.reserve(sale, known, 1, ""); r.status != http.StatusAccepted {
		t.Fatalf("a first claim: %d %v", r.status, r.body)
	}
	for i := range 10 {
		tok := e.token("mallory" + strings.Repeat("x", i))
		dot := strings.LastIndexByte(tok, '.')
		forged := tok[:dot+1] + strings.Repeat("A", len(tok)-dot-1)
		if r := e.do("GET", "/sales/"+sale+"/standing", "", nil, "Cookie", "seckill_buyer="+forged); r.status != http.StatusUnauthorized {
			t.Fatalf("forged cookie %d: %d %v; want 401", i+1, r.status, r.body)
		}
	}
	r := e.do("GET", "/api/v1/sales/"+sale+"/reservations/mine", e.token("late"), nil)
	if r.status != http.StatusTooManyRequests || r.body["error"].(map[string]any)["code"] != "rate_limited" {
		t.Fatalf("a new token after 10 forged cookies: %d %v; want 429 rate_limited", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/sales/"+sale+"/reservations/mine", known, nil); r.status != http.StatusOK {
		t.Fatalf("a token verified before: %d %v; want 200", r.status, r.body)
	}
}
