package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// testHealKeepsAdmission: a queue sale whose stock hashes vanished (a
// Redis that restarted without its data) is recreated by the heal as a
// queue sale: a claim its admission did not let in is still refused.
func testHealKeepsAdmission(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(10, 1)
	sale.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 5}
	mustPreheat(t, s, sale)
	bs, err := s.buckets(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(u string) seckill.Outcome {
		t.Helper()
		got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, u, 1, "")})
		if err != nil {
			t.Fatalf("reserve %s: %v", u, err)
		}
		return got[0].Outcome
	}
	if got := claim("before"); got != seckill.OutcomeAdmissionRequired {
		t.Fatalf("a claim not let in, before the loss: %v; want admission required", got)
	}
	for _, tag := range bs.tags {
		if err := s.client.Do(ctx, s.client.B().Del().Key(s.keys(tag)[keyStock]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	const token = "1:admission"
	if recreated, err := s.Healer().BeginHeal(ctx, sale, token); err != nil || !recreated {
		t.Fatalf("BeginHeal = %v, %v; want the stock recreated", recreated, err)
	}
	if _, _, err := s.Healer().ApplyHeal(ctx, sale, token, nil, nil); err != nil {
		t.Fatalf("ApplyHeal: %v", err)
	}
	if got := claim("after"); got != seckill.OutcomeAdmissionRequired {
		t.Errorf("a claim not let in, after the heal recreated the sale: %v; want admission required", got)
	}
}

// testHealBringsKeysBack: a heal that adds the record of an order made
// under an Idempotency-Key (known by its digest, as the database keeps
// it) brings the key back: a retry with the key and the same qty replays
// the order's reservation, from the reserve script and from Replays
// alike, and another qty is a reused key. A record added without a
// digest, and the same key of another buyer, answer as new claims. A
// cancelled order's record comes back restored, holding nothing, and its
// key replays it too.
func testHealBringsKeysBack(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 3))
	keyed := seckill.ReservationRecord{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: "ann", Qty: 1,
		ReservedAt: time.Now(), KeyDigest: seckill.IdempotencyDigest("k-1")}
	plain := seckill.ReservationRecord{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: "ann", Qty: 1,
		ReservedAt: time.Now()}
	// A keyed order that was cancelled: its unit went back to stock.
	cancelled := seckill.ReservationRecord{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: "ann", Qty: 1,
		Restored: true, ReservedAt: time.Now(), KeyDigest: seckill.IdempotencyDigest("k-c")}
	sale.Unsold = sale.Stock - 2 // the database's figure, which counts both live orders
	const token = "1:keys"
	if _, err := s.Healer().BeginHeal(ctx, sale, token); err != nil {
		t.Fatalf("BeginHeal: %v", err)
	}
	if added, _, err := s.Healer().ApplyHeal(ctx, sale, token, []seckill.ReservationRecord{keyed, plain, cancelled}, nil); err != nil || added != 2 {
		t.Fatalf("ApplyHeal = %d, %v; want 2 records added (the cancelled one holds nothing)", added, err)
	}
	if _, _, st, err := s.StockStore().Reservation(ctx, cancelled.ReservationID); err != nil || st != "restored" {
		t.Errorf("the cancelled order's record: %q, %v; want restored", st, err)
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 2 {
		t.Errorf("after the heal: %+v, %v; want reserved 2", lvl, err)
	}
	reqs := []seckill.ReserveRequest{
		request(sale.ID, "ann", 1, "k-1"), // the keyed order's retry
		request(sale.ID, "ann", 2, "k-1"), // the same key, another qty
		request(sale.ID, "bob", 1, "k-1"), // another buyer's key
		request(sale.ID, "ann", 1, "k-c"), // the cancelled order's retry
	}
	want := []seckill.ReserveResult{
		{Outcome: seckill.OutcomeReplayed, ReservationID: keyed.ReservationID, Qty: 1},
		{Outcome: seckill.OutcomeKeyReused},
		{},
		{Outcome: seckill.OutcomeReplayed, ReservationID: cancelled.ReservationID, Qty: 1},
	}
	replays, err := s.StockStore().Replays(ctx, sale.ID, reqs)
	if err != nil {
		t.Fatalf("Replays: %v", err)
	}
	for i := range reqs {
		if replays[i].Outcome != want[i].Outcome || replays[i].ReservationID != want[i].ReservationID {
			t.Errorf("Replays of request %d: %+v; want %+v", i, replays[i], want[i])
		}
	}
	want[2].Outcome = seckill.OutcomeReserved
	for i, r := range reqs {
		got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{r})
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		if got[0].Outcome != want[i].Outcome || want[i].ReservationID != "" && got[0].ReservationID != want[i].ReservationID {
			t.Errorf("reserve %d: %+v; want %+v", i, got[0], want[i])
		}
	}
	// ann holds the two healed units, not the cancelled one; a new key
	// takes her third.
	got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "ann", 1, "k-2")})
	if err != nil || got[0].Outcome != seckill.OutcomeReserved {
		t.Fatalf("a new key: %+v, %v; want reserved", got, err)
	}
}

// testLoaderHoldsALostSale: the loader loads a sale whose database row
// counts units sold held, as a heal left unfinished long ago (every
// bucket refuses claims, and the heal watcher sees a stale heal); a sale
// that sold nothing it loads fresh, and one still loaded it leaves alone.
func testLoaderHoldsALostSale(t *testing.T, s *Store) {
	ctx := context.Background()
	claims := func(sale *seckill.Sale) (refused int) {
		t.Helper()
		for i := range 6 {
			_, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, fmt.Sprintf("u%d", i), 1, "")})
			if errors.Is(err, ErrHealing) {
				refused++
			} else if err != nil {
				t.Fatalf("reserve: %v", err)
			}
		}
		return refused
	}

	lost := liveSale(10, 1)
	lost.Unsold = 7 // the database sold 3
	if created, err := s.Loader(nil).Preheat(ctx, lost); err != nil || !created {
		t.Fatalf("Loader.Preheat of a lost sale = %v, %v; want created", created, err)
	}
	if n := claims(lost); n != 6 {
		t.Errorf("%d of 6 claims refused while held; want all", n)
	}
	st, err := s.Healer().SaleState(ctx, lost.ID)
	if err != nil || !st.Loaded || !st.Healing || st.Total != 10 {
		t.Fatalf("SaleState of the held sale = %+v, %v; want loaded, healing, total 10", st, err)
	}
	check := seckill.StockCheck{Now: st, Sold: 3, At: time.Now(), StaleHeal: time.Minute, Preheated: true}
	if got := seckill.JudgeStockStore(check); got == seckill.StockFine || got == seckill.StockNotLoaded {
		t.Errorf("the held sale judged %d; want a loss to heal", got)
	}
	if created, err := s.Loader(nil).Preheat(ctx, lost); err != nil || created {
		t.Errorf("a second Loader.Preheat = %v, %v; want nothing loaded", created, err)
	}

	fresh := liveSale(10, 1)
	fresh.Unsold = fresh.Stock
	if created, err := s.Loader(nil).Preheat(ctx, fresh); err != nil || !created {
		t.Fatalf("Loader.Preheat of a new sale = %v, %v; want created", created, err)
	}
	if n := claims(fresh); n != 0 {
		t.Errorf("%d claims of a new sale refused; want none", n)
	}

	// A sale that sold nothing but whose entries or places the database
	// keeps was loaded before too.
	kept := liveSale(10, 1)
	kept.Unsold = kept.Stock
	keeps := func(context.Context, *seckill.Sale) (int64, error) { return 3, nil }
	if created, err := s.Loader(keeps).Preheat(ctx, kept); err != nil || !created {
		t.Fatalf("Loader.Preheat of a sale with kept entries = %v, %v; want created", created, err)
	}
	if n := claims(kept); n != 6 {
		t.Errorf("%d of 6 claims of a sale with kept entries refused; want all (held)", n)
	}
	down := func(context.Context, *seckill.Sale) (int64, error) { return 0, errors.New("database down") }
	if _, err := s.Loader(down).Preheat(ctx, liveSale(10, 1)); err == nil {
		t.Error("Loader.Preheat loaded a sale whose kept rows it could not count")
	}

	loaded := mustPreheat(t, s, liveSale(10, 1))
	loaded.Unsold = 7
	if created, err := s.Loader(nil).Preheat(ctx, loaded); err != nil || created {
		t.Errorf("Loader.Preheat of a loaded sale = %v, %v; want nothing loaded", created, err)
	}
	if n := claims(loaded); n != 0 {
		t.Errorf("%d claims of a loaded sale refused after Loader.Preheat; want none", n)
	}
}
