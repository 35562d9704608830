package sqlstore

import (
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestBuyerFailedOrdersAreTheBuyersOwn: a buyer's failed orders of a sale,
// oldest first, on every dialect; never another buyer's or sale's, not
// even a buyer whose id differs by a trailing space (MySQL pads spaces),
// and the same holds for their orders.
func TestBuyerFailedOrdersAreTheBuyersOwn(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		t0 := time.Now().Add(-time.Hour).UTC()
		record := func(sale, user string, min int) string {
			t.Helper()
			id := seckill.NewReservationID(sale, t0)
			if err := st.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: id, SaleID: sale, UserID: user, Qty: 1,
				Reason: seckill.ReasonOverLimit, Attempts: 1, CreatedAt: t0.Add(time.Duration(min) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			return id
		}
		later := record("tea", "ann", 2)
		sooner := record("tea", "ann", 1)
		padded := record("tea", "ann ", 3)
		record("tea", "bob", 0)
		record("te", "ann", 0) // a sale id that prefixes the other

		ids := func(fs []*seckill.FailedOrder) (out []string) {
			for _, f := range fs {
				out = append(out, f.ReservationID)
			}
			return out
		}
		for _, c := range []struct {
			user string
			want []string
		}{
			{"ann", []string{sooner, later}},
			{"ann ", []string{padded}},
			{"cy", nil},
		} {
			got, err := st.BuyerFailedOrders(ctx, "tea", c.user)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), c.want) {
				t.Errorf("BuyerFailedOrders(tea, %q) = %v; want %v", c.user, ids(got), c.want)
			}
		}
		if got, err := st.BuyerFailedOrders(ctx, "", "ann"); err != nil || len(got) != 0 {
			t.Errorf("an invalid sale id: %v, %v; want none", ids(got), err)
		}

		createSale(t, db, "tea", 10)
		evs := events("tea", 1, 1)
		evs[0].UserID, evs[1].UserID = "ann", "ann "
		persist(t, st, "tea", evs)
		for i, user := range []string{"ann", "ann "} {
			got, err := st.BuyerOrders(ctx, "tea", user)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ReservationID != evs[i].ReservationID {
				t.Errorf("BuyerOrders(tea, %q): %d orders; want only %s", user, len(got), evs[i].ReservationID)
			}
		}
	})
}
