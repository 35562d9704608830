package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestRateLimitEndToEnd: the default 20/1m per IP on the real stack: one
// address firing 100 reservation requests (100 different buyers) gets 20
// through and 80 answered 429 with a sane Retry-After, before any stock
// logic.
func TestRateLimitEndToEnd(t *testing.T) {
	base := stacks[0].config(t)
	e := startEngine(t, func(c *Config) { base(c); c.RateLimitIP = "20/1m" })
	sale := e.liveSale(1000, 1)
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.reserve(sale, e.token(fmt.Sprint("ip-", i)), 1, "")
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			if r.status == http.StatusTooManyRequests {
				ra, err := strconv.Atoi(r.header.Get("Retry-After"))
				if err != nil || ra < 1 || ra > 60 || r.code() != "rate_limited" {
					t.Errorf("429 with Retry-After %q, code %q", r.header.Get("Retry-After"), r.code())
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("one IP, 100 requests: %v", codes)
	if codes[202] != 20 || codes[429] != 80 {
		t.Fatalf("got %v, want 20×202 and 80×429", codes)
	}
	if lvl := e.stock(sale); lvl.Reserved != 20 {
		t.Fatalf("reserved %d units, want 20: a limited request must not reach the stock", lvl.Reserved)
	}
}

// TestRateLimitAcrossNodes: two nodes on one Redis, one address sending
// 100 reservation requests alternately to each: still exactly 20 pass (the
// limit is counted in the reserve script, in Redis, not per node), and
// with a node restarted at a raised limit, that node lets the address in at
// once while the other still refuses it (keys per limit: neither locks the
// other out).
func TestRateLimitAcrossNodes(t *testing.T) {
	base := stacks[0].config(t)
	a := startEngine(t, func(c *Config) { base(c); c.RateLimitIP = "20/1m" })
	b := startEngine(t, func(c *Config) { base(c); c.RateLimitIP = "20/1m" })
	sale := a.liveSale(1000, 1)
	codes := map[int]int{}
	for i := range 100 {
		node := a
		if i%2 == 1 {
			node = b
		}
		codes[node.reserve(sale, node.token(fmt.Sprint("two-", i)), 1, "").status]++
	}
	t.Logf("one IP, 100 requests over two nodes: %v", codes)
	if codes[202] != 20 || codes[429] != 80 {
		t.Fatalf("got %v, want 20×202 and 80×429 across the two nodes", codes)
	}
	raised := startEngine(t, func(c *Config) { base(c); c.RateLimitIP = "40/1m" })
	if r := raised.reserve(sale, raised.token("raised-1"), 1, ""); r.status != http.StatusAccepted {
		t.Errorf("node at the raised limit: %d %s; want 202 at once", r.status, r.body)
	}
	if r := a.reserve(sale, a.token("old-1"), 1, ""); r.status != http.StatusTooManyRequests {
		t.Errorf("node still at 20/1m: %d; want 429 (its own count is spent)", r.status)
	}
}

// TestSoldOutFlagClearedByRestore: after sell-out the node answers from its
// local flag; a restore brings the unit back and the very next buyer gets
// it, long before the flag's safety interval would have expired.
func TestSoldOutFlagClearedByRestore(t *testing.T) {
	base := stacks[0].config(t)
	e := startEngine(t, func(c *Config) { base(c); c.SoldOutInterval = time.Hour })
	sale := e.liveSale(1, 1)
	first := e.reserve(sale, e.token("first"), 1, "")
	if first.status != 202 {
		t.Fatalf("first buyer: %d %v", first.status, first.body)
	}
	for i := range 5 {
		if r := e.reserve(sale, e.token(fmt.Sprint("late-", i)), 1, ""); r.code() != "sold_out" {
			t.Fatalf("after sell-out: %d %v", r.status, r.body)
		}
	}
	if e.m.gate.Hits() == 0 {
		t.Fatal("no sold-out answer came from the local flag")
	}
	id := first.body["reservation_id"].(string)
	e.awaitOrders(map[string]string{id: e.token("first")}, time.Minute)
	if r := e.restore(id, "refund"); r.status != 200 {
		t.Fatalf("restore: %d %v", r.status, r.body)
	}
	var r reply
	if !servicetest.Eventually(30*time.Second, func() bool { r = e.reserve(sale, e.token("second-chance"), 1, ""); return r.status == 202 }) {
		t.Fatalf("the restored unit was not sold again: %d %v", r.status, r.body)
	}
}

// TestSoldOutBeforeBody: once a node has flagged a sale sold out, a
// reservation request is answered sold_out before its body is read (a body
// that would be refused answers 409, not 400) and before any rate limit
// (the address's tiny limit is not spent); a request with an
// Idempotency-Key still goes on to be decided.
func TestSoldOutBeforeBody(t *testing.T) {
	base := stacks[0].config(t)
	e := startEngine(t, func(c *Config) { base(c); c.RateLimitIP = "2/1m" })
	sale := e.liveSale(1, 1)
	if r := e.reserve(sale, e.token("first"), 1, ""); r.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	if r := e.reserve(sale, e.token("second"), 1, ""); r.status != http.StatusConflict || r.code() != "sold_out" {
		t.Fatalf("second: %d %s; want 409 sold_out (which flags the sale)", r.status, r.body)
	}
	for i := range 5 {
		r := e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(fmt.Sprint("late-", i)), `{"qty": "not a number"`)
		if r.status != http.StatusConflict || r.code() != "sold_out" {
			t.Fatalf("late request %d with a bad body: %d %s; want 409 sold_out before the body is read", i, r.status, r.body)
		}
	}
	if r := e.reserve(sale, e.token("first"), 1, "k1"); r.status == http.StatusBadRequest {
		t.Errorf("keyed request: %d %s; want it decided, not refused", r.status, r.body)
	}
}
