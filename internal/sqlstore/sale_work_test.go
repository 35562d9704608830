package sqlstore

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestSaleWork: SaleWork counts recorded reservations (orders and failed
// orders), orders awaiting payment and restores not done, of its sale
// only.
func TestSaleWork(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 3)
		createSale(t, db, "cake", 5)
		now := time.Now()
		evs := events("tea", 1, 1, 1, 1) // the fourth is rejected: a failed order
		if _, err := st.PersistReservations(ctx, "tea", evs, now, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PersistReservations(ctx, "cake", events("cake", 1, 1), now, time.Minute); err != nil {
			t.Fatal(err)
		}
		want := func(recorded, awaiting, restores int64) {
			t.Helper()
			r, a, o, err := st.Ledger.SaleWork(ctx, "tea")
			if err != nil || r != recorded || a != awaiting || o != restores {
				t.Fatalf("SaleWork = %d, %d, %d, %v; want %d, %d, %d", r, a, o, err, recorded, awaiting, restores)
			}
		}
		want(4, 3, 0)
		if _, err := st.PayOrder(ctx, evs[0].ReservationID, now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Restores.RestoreOrder(ctx, evs[1].ReservationID, "timeout", now); err != nil {
			t.Fatal(err)
		}
		want(4, 1, 1)
		if err := st.Restores.FinishRestores(ctx, []string{evs[1].ReservationID}, "", now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CancelOrder(ctx, evs[2].ReservationID, "buyer", now); err != nil {
			t.Fatal(err)
		}
		want(4, 0, 0)
		c, err := st.Ledger.SaleCounters(ctx, "tea")
		if err != nil {
			t.Fatal(err)
		}
		// 3 units on sale, orders 1 paid, 1 restored, 1 cancelled by its
		// buyer (no units back), 1 rejected: 1 unsold.
		if want := (SaleCounters{Stock: 3, Unsold: 1, FailedOrders: 1, FailedUnits: 1}); c != want {
			t.Errorf("SaleCounters = %+v; want %+v", c, want)
		}
		if _, err := st.Restores.ParkRestore(ctx, seckill.NewReservationID("tea", now), "tea", "early", now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Restores.RestoreOrder(ctx, evs[3].ReservationID, "refund", now); err != nil {
			t.Fatal(err)
		}
		if c, err = st.Ledger.SaleCounters(ctx, "tea"); err != nil || c.Parked != 1 || c.RedisPending != 1 || c.Alerted != 0 {
			t.Errorf("SaleCounters with a parked and a pending restore = %+v, %v", c, err)
		}
		if _, err := st.Ledger.SaleCounters(ctx, "nosale"); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("SaleCounters of an unknown sale: %v; want ErrNotFound", err)
		}
		if r, a, o, err := st.Ledger.SaleWork(ctx, "nosale"); err != nil || r+a+o != 0 {
			t.Errorf("SaleWork of an unknown sale = %d, %d, %d, %v; want zeros", r, a, o, err)
		}
	})
}
