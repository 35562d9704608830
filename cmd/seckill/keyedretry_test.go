package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestKeyedRetryAfterItsRecordWasLost: a buyer's claim became an order,
// then Redis lost the key's record while the buyer's count stayed (what a
// failover to a replica that missed the reservation leaves once the heal
// rebuilt the count from the database). The retry with the same
// Idempotency-Key is answered 202 with the same reservation, not
// limit_exceeded: the order carries the key's digest.
func TestKeyedRetryAfterItsRecordWasLost(t *testing.T) {
	srv := redistest.StartServer(t)
	e, _ := healingEngine(t, "redis://"+srv.Addr, "none")
	sale := e.liveSale(5, 1)
	tok, id := e.orderedKeyedClaim(t, sale, "alice", "k-alice")
	// Every idempotency record of the (private) Redis goes.
	redisDo(t, srv.Addr, "EVAL", `for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0`, "0", "*:idem")
	if status, body := e.tryReserve(sale, e.token("bob"), "k-alice"); status != http.StatusAccepted || body["reservation_id"] == id {
		t.Fatalf("another buyer with the same key: %d %v; want a claim of its own", status, body)
	}
	status, body := e.tryReserve(sale, tok, "k-alice")
	if status != http.StatusAccepted || body["reservation_id"] != id {
		t.Fatalf("retry with the same key: %d %v; want 202 with %s", status, body, id)
	}
	if status, body := e.tryReserve(sale, tok, "k-other"); status != http.StatusConflict || body["error"].(map[string]any)["code"] != "limit_exceeded" {
		t.Fatalf("another key: %d %v; want 409 limit_exceeded", status, body)
	}
}

// TestKeyedRetryAfterRedisLostEverything: a buyer's keyed claim became an
// order; then Redis restarted empty, and the heal rebuilt the sale from
// the database, which keeps only the key's digest. A retry with the same
// Idempotency-Key is the same claim: 202 with the same reservation. The
// sales have a limit of 2, so the limit does not catch the retry (as it
// does in TestKeyedRetryAfterItsRecordWasLost); bucketed, where the key
// lives in the buyer's home bucket; and sold out by the heal's end, where
// a keyed request is answered from the idempotency entries alone
// (StockStore.Replays), and a retry must not be told sold_out. In the
// cancelled cases the buyer cancelled the order before the loss: the
// retry is answered with it as before the loss, not taken as a new
// claim, and the sale, with nothing sold, is healed at all.
func TestKeyedRetryAfterRedisLostEverything(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stock, buckets int64
		cancelled      bool // the buyer cancels the order before the loss
	}{
		{"plain", 5, 1, false},
		{"bucketed", 6, 3, false},
		{"sold out", 2, 1, false},
		{"cancelled", 5, 1, true},
		{"cancelled bucketed", 6, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			e, logs := healingEngine(t, "redis://"+srv.Addr, "none")
			sale := e.liveBucketedSale(tc.stock, 2, tc.buckets)
			tok, id := e.orderedKeyedClaim(t, sale, "alice", "k-alice")
			if tc.cancelled {
				// Cancelled, the order's unit is back in stock; a retry of
				// its key is still the same request, answered as before.
				if r := e.do("POST", "/api/v1/reservations/"+id+"/cancel", tok, nil); r.status != http.StatusOK || r.body["status"] != "cancelled" {
					t.Fatalf("cancel: %d %v", r.status, r.body)
				}
				if status, body := e.tryReserve(sale, tok, "k-alice"); status != http.StatusAccepted || body["reservation_id"] != id {
					t.Fatalf("retry of a cancelled order's key before the loss: %d %v; want 202 with %s", status, body, id)
				}
			}
			srv.Kill()
			srv.Restart(t)
			// The heal is over when the sale sells again, here to carol.
			carol := e.token("carol")
			var last string
			if !servicetest.Eventually(time.Minute, func() bool {
				status, body := e.tryReserve(sale, carol, "k-carol")
				last = fmt.Sprint(status, body)
				return status == http.StatusAccepted
			}) {
				t.Fatal("the sale was not healed within a minute; the last claim:", last, logs.String())
			}
			if tc.stock == 2 { // the node learns it is sold out
				r := e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token("dave"), map[string]any{"qty": 1})
				if r.status != http.StatusConflict || r.body["error"].(map[string]any)["code"] != "sold_out" {
					t.Fatalf("a claim of a sold-out sale: %d %v; want 409 sold_out", r.status, r.body)
				}
			}
			status, body := e.tryReserve(sale, tok, "k-alice")
			if status != http.StatusAccepted || body["reservation_id"] != id {
				t.Fatalf("retry with the same key after the heal: %d %v; want 202 with %s", status, body, id)
			}
			status, body = e.tryReserve(sale, tok, "k-other")
			if tc.stock == 2 {
				if status != http.StatusConflict || body["error"].(map[string]any)["code"] != "sold_out" {
					t.Fatalf("another key of a sold-out sale: %d %v; want 409 sold_out", status, body)
				}
				return
			}
			if other, _ := body["reservation_id"].(string); status != http.StatusAccepted || other == "" || other == id {
				t.Fatalf("another key: %d %v; want a claim of its own", status, body)
			}
		})
	}
}

// orderedKeyedClaim claims a unit of sale for user under key and waits
// until it is an order; it returns the user's token and the reservation.
func (e *engine) orderedKeyedClaim(t *testing.T, sale, user, key string) (tok, id string) {
	t.Helper()
	tok = e.token(user)
	status, body := e.tryReserve(sale, tok, key)
	id, _ = body["reservation_id"].(string)
	if status != http.StatusAccepted || id == "" {
		t.Fatalf("claim: %d %v; want 202", status, body)
	}
	if st := e.settle([]claim{{id: id, user: user, tok: tok}}, time.Minute)[id]; st != "ordered" {
		t.Fatalf("claim %s ended %q; want ordered", id, st)
	}
	return tok, id
}
