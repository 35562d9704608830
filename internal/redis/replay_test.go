package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
)

// testReplays: Replays answers every keyed request exactly as the reserve
// script's idempotency check would (checked against the script itself, on
// a sale sold out so that the script cannot reserve anything), and the
// zero outcome where the script would go on to the limit and stock.
func testReplays(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(3, 3))
	first := []seckill.ReserveRequest{
		request(sale.ID, "alice", 2, "k1"),
		request(sale.ID, "bob:with:colons", 1, "k2"),
	}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, first); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	probes := []seckill.ReserveRequest{
		request(sale.ID, "alice", 2, "k1"),           // replay
		request(sale.ID, "alice", 1, "k1"),           // same key, other qty
		request(sale.ID, "alice", 1, "k2"),           // bob's key, another user
		request(sale.ID, "bob:with:colons", 1, "k2"), // replay, user with colons
		request(sale.ID, "bob:with", 1, ":colonsk2"), // same concatenation, other user
		request(sale.ID, "carol", 1, "k3"),           // a key never seen
		request(sale.ID, "carol", 1, ""),             // no key
	}
	got, err := s.StockStore().Replays(ctx, sale.ID, probes)
	if err != nil {
		t.Fatalf("Replays: %v", err)
	}
	want, err := s.StockStore().Reserve(ctx, sale.ID, probes)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	for i := range probes {
		w := want[i]
		if w.Outcome == seckill.OutcomeSoldOut || w.Outcome == seckill.OutcomeLimitExceeded {
			w = seckill.ReserveResult{} // decided past the idempotency check
		}
		if got[i] != w {
			t.Errorf("probe %d %+v: Replays = %+v; the script answers %+v", i, probes[i], got[i], want[i])
		}
	}
	if got[0].Outcome != seckill.OutcomeReplayed || got[0].ReservationID != first[0].ReservationID {
		t.Errorf("replay of alice's k1 = %+v; want %s", got[0], first[0].ReservationID)
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 3 {
		t.Errorf("Stock = %+v, %v; want 3 reserved (Replays reserves nothing)", lvl, err)
	}
	if res, err := s.StockStore().Replays(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "x", 1, "")}); err != nil || res[0] != (seckill.ReserveResult{}) {
		t.Errorf("Replays of a keyless request = %+v, %v; want the zero result without a call", res, err)
	}
}

// testCompactIdempotency: the idempotency hash stores reservation ids
// without their sale prefix, and entries in the older, whole-id form
// still replay, through the script and through Replays.
func testCompactIdempotency(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 3))
	r := request(sale.ID, "alice", 1, "k1")
	if _, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{r}); err != nil {
		t.Fatal(err)
	}
	idem := s.keys(sale.ID)[keyIdem]
	v, err := s.client.Do(ctx, s.client.B().Hget().Key(idem).Field(idemField("alice", "k1")).Build()).ToString()
	if err != nil || strings.Contains(v, ".") || !strings.HasSuffix(r.ReservationID, "."+strings.TrimPrefix(v, "1:")) {
		t.Fatalf("stored idempotency value %q, %v; want 1:<id without the sale>", v, err)
	}
	old := request(sale.ID, "bob", 1, "k2")
	if err := s.client.Do(ctx, s.client.B().Hset().Key(idem).FieldValue().FieldValue(idemField("bob", "k2"), "1:"+old.ReservationID).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	probes := []seckill.ReserveRequest{request(sale.ID, "alice", 1, "k1"), request(sale.ID, "bob", 1, "k2")}
	want := []string{r.ReservationID, old.ReservationID}
	got, err := s.StockStore().Reserve(ctx, sale.ID, probes)
	if err != nil {
		t.Fatal(err)
	}
	looked, err := s.StockStore().Replays(ctx, sale.ID, probes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range probes {
		if got[i].Outcome != seckill.OutcomeReplayed || got[i].ReservationID != want[i] || looked[i] != got[i] {
			t.Errorf("probe %d: script %+v, lookup %+v; want a replay of %s", i, got[i], looked[i], want[i])
		}
	}
}
