package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
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
	tok := e.token("alice")

	status, body := e.tryReserve(sale, tok, "k-alice")
	id, _ := body["reservation_id"].(string)
	if status != http.StatusAccepted || id == "" {
		t.Fatalf("claim: %d %v; want 202", status, body)
	}
	if st := e.settle([]claim{{id: id, user: "alice", tok: tok}}, time.Minute)[id]; st != "ordered" {
		t.Fatalf("claim %s ended %q; want ordered", id, st)
	}
	// Every idempotency record of the (private) Redis goes.
	redisDo(t, srv.Addr, "EVAL", `for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0`, "0", "*:idem")
	if status, body := e.tryReserve(sale, e.token("bob"), "k-alice"); status != http.StatusAccepted || body["reservation_id"] == id {
		t.Fatalf("another buyer with the same key: %d %v; want a claim of its own", status, body)
	}
	status, body = e.tryReserve(sale, tok, "k-alice")
	if status != http.StatusAccepted || body["reservation_id"] != id {
		t.Fatalf("retry with the same key: %d %v; want 202 with %s", status, body, id)
	}
	if status, body := e.tryReserve(sale, tok, "k-other"); status != http.StatusConflict || body["error"].(map[string]any)["code"] != "limit_exceeded" {
		t.Fatalf("another key: %d %v; want 409 limit_exceeded", status, body)
	}
}
