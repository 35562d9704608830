package redis

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestRedrive(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		runParallel(t, newStore, []storeTest{{"TakesWhatRedisDoesNotCount", testRedriveTakes}})
	})
}

// testRedriveTakes: a re-driven order whose claim Redis still counts
// (active record) takes nothing more; one Redis never saw, or restored,
// takes its units, its buyer's and an active record, once; one past the
// total, or of a sale Redis does not hold, changes nothing.
func testRedriveTakes(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(5, 3))
	st, rd := s.StockStore(), s.Redriver()
	reserved := func() int64 {
		t.Helper()
		lvl, err := st.Stock(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		return lvl.Reserved
	}
	take := func(o *seckill.Order, want bool) {
		t.Helper()
		if got, err := rd.TakeRedriven(ctx, o, time.Now()); err != nil || got != want {
			t.Fatalf("TakeRedriven(%s of %s) = %v, %v; want %v", o.ReservationID, o.UserID, got, err, want)
		}
	}
	order := func(id, user string, qty int64) *seckill.Order {
		return &seckill.Order{ReservationID: id, SaleID: sale.ID, UserID: user, Qty: qty}
	}

	alice := request(sale.ID, "alice", 1, "")
	carol := request(sale.ID, "carol", 1, "")
	if res, err := st.Reserve(ctx, sale.ID, []seckill.ReserveRequest{alice, carol}); err != nil || res[0].Outcome != seckill.OutcomeReserved || res[1].Outcome != seckill.OutcomeReserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	take(order(alice.ReservationID, "alice", 1), false) // Redis counts it
	if got := reserved(); got != 2 {
		t.Fatalf("reserved %d after an active claim was re-driven; want 2", got)
	}

	bob := order(seckill.NewReservationID(sale.ID, time.Now()), "bob", 2) // never in Redis
	take(bob, true)
	take(bob, false) // again: counted now
	if got, err := st.Held(ctx, sale.ID, "bob"); err != nil || got != 2 || reserved() != 4 {
		t.Fatalf("bob holds %d (%v), reserved %d; want 2, 4", got, err, reserved())
	}
	if user, qty, status, err := st.Reservation(ctx, bob.ReservationID); err != nil || user != "bob" || qty != 2 || status != StatusActive {
		t.Fatalf("bob's record: %s %d %s %v; want active, bob, 2", user, qty, status, err)
	}

	if _, err := s.Restorer().RestoreReservation(ctx, carol.ReservationID); err != nil {
		t.Fatal(err)
	}
	take(order(carol.ReservationID, "carol", 1), true) // restored: not counted
	if got := reserved(); got != 4 {
		t.Fatalf("reserved %d after carol's restored claim was re-driven; want 4", got)
	}

	take(order(seckill.NewReservationID(sale.ID, time.Now()), "dave", 2), false) // 4 + 2 > 5
	if got, err := st.Held(ctx, sale.ID, "dave"); err != nil || got != 0 || reserved() != 4 {
		t.Fatalf("a take past the total: dave holds %d (%v), reserved %d; want 0, 4", got, err, reserved())
	}
	take(&seckill.Order{ReservationID: seckill.NewReservationID("nosuchsale", time.Now()), UserID: "erin", Qty: 1}, false)
}
