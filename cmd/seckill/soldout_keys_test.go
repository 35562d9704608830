package main

import (
	"fmt"
	"testing"
	"time"
)

// TestKeyedRequestsTakeTheFastPath: on a sold-out sale, buyers who send
// an Idempotency-Key on every request are answered by this node too: a
// retry gets its reservation back (the same body as the first answer), a
// new key gets sold_out, and neither runs the reserve script.
func TestKeyedRequestsTakeTheFastPath(t *testing.T) {
	base := stacks[0].config(t)
	e := startEngine(t, func(c *Config) { base(c); c.SoldOutInterval = time.Hour })
	sale := e.liveSale(1, 1)
	winner := e.token("winner")
	first := e.reserve(sale, winner, 1, "key-1")
	if first.status != 202 {
		t.Fatalf("first buyer: %d %v", first.status, first.body)
	}
	if r := e.reserve(sale, e.token("flagger"), 1, "key-f"); r.code() != "sold_out" {
		t.Fatalf("after sell-out: %d %v", r.status, r.body)
	}
	// The gate flags on a sold-out answer; from here on no call reaches the
	// reserve script.
	if !e.m.gate.SoldOut(sale) {
		t.Fatal("the sale is not flagged after a sold-out answer")
	}
	before := e.m.gate.Hits()
	for i := range 5 {
		if r := e.reserve(sale, e.token(fmt.Sprint("late-", i)), 1, fmt.Sprint("key-late-", i)); r.code() != "sold_out" {
			t.Fatalf("keyed request after sell-out: %d %v", r.status, r.body)
		}
	}
	again := e.reserve(sale, winner, 1, "key-1")
	if again.status != first.status || again.body["reservation_id"] != first.body["reservation_id"] {
		t.Fatalf("retry of the winning key: %d %v; want %d %v", again.status, again.body, first.status, first.body)
	}
	if r := e.reserve(sale, winner, 2, "key-1"); r.code() != "idempotency_key_reused" {
		t.Fatalf("winning key with another qty: %d %v", r.status, r.body)
	}
	if got := e.m.gate.Hits() - before; got != 5 {
		t.Fatalf("%d keyed sold-out answers came from the local flag; want 5", got)
	}
	if got := e.m.gate.ReplayHits(); got != 2 {
		t.Fatalf("%d replays answered by the lookup; want 2", got)
	}
}
