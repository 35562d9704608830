package sqlstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestBuyerIDsCompareByteForByte: buyers whose ids differ by a trailing
// space or by case only are different buyers in every dialect, as they are
// in Redis. The writer's limit read (each batch by a store that keeps no
// holdings, so it reads the database) charges no buyer another's units,
// reconciliation counts no buyer over the limit, and no buyer's orders or
// keyed order are another's. MySQL's PAD SPACE collations made 'ann' and
// 'ann ' one buyer (migration 0019).
func TestBuyerIDsCompareByteForByte(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		createTea(t, db, 2)
		buyers := []string{"ann", "ann ", "Ann"}
		key := seckill.IdempotencyDigest("k-1") // one key, as two clients may well choose
		// buy persists a unit for user through a store that keeps no
		// holdings (a writer in another process), so the limit is read
		// from the database.
		buy := func(user, digest string) (seckill.PersistOutcome, string) {
			t.Helper()
			ev := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
				UserID: user, Qty: 1, ReservedAt: time.Now(), KeyDigest: digest}
			out, err := NewOrderStore(db).PersistReservations(ctx, "tea", []seckill.ReservationEvent{ev}, time.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return out[0], ev.ReservationID
		}
		own := map[string][]string{} // buyer → their reservation ids, oldest first
		for round := range 2 {       // each buyer's first unit, then their second
			for _, b := range buyers {
				digest := ""
				if round == 0 && b != "ann " {
					digest = key // ann and Ann bought under the key, not "ann "
				}
				out, id := buy(b, digest)
				if out != seckill.PersistCreated {
					t.Errorf("%q's unit %d of limit 2: outcome %v, want created", b, round+1, out)
					continue
				}
				own[b] = append(own[b], id)
			}
		}
		for _, b := range buyers {
			if out, _ := buy(b, ""); out != seckill.PersistOverLimit {
				t.Errorf("%q's third unit of limit 2: outcome %v, want over limit", b, out)
			}
		}

		orders := NewOrderStore(db)
		for _, b := range buyers {
			got, err := orders.BuyerOrders(ctx, "tea", b)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, o := range got {
				if o.UserID != b {
					t.Errorf("BuyerOrders(%q) has an order of %q", b, o.UserID)
				}
				ids = append(ids, o.ReservationID)
			}
			if !slices.Equal(ids, own[b]) {
				t.Errorf("BuyerOrders(%q) = %v, want their own %v", b, ids, own[b])
			}
		}
		for _, b := range []string{"ann", "Ann"} {
			if o, err := orders.OrderOfKey(ctx, "tea", b, key); err != nil || o.ReservationID != own[b][0] {
				t.Errorf("OrderOfKey(%q) = %+v, %v; want their order %s", b, o, err, own[b][0])
			}
		}
		if o, err := orders.OrderOfKey(ctx, "tea", "ann ", key); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf(`OrderOfKey("ann ") = %+v, %v; want ErrNotFound (the key is ann's and Ann's)`, o, err)
		}

		totals, err := NewLedgerStore(db).LedgerTotals(ctx, "tea")
		if err != nil {
			t.Fatal(err)
		}
		if totals.OverLimitBuyers != 0 {
			t.Errorf("%d buyers over the limit of 2, want none: each of %q holds 2", totals.OverLimitBuyers, buyers)
		}
	})
}
