package sqlstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// TestBuyerFailedOrdersAreTheBuyersOwn: a buyer's failed orders of a sale,
// oldest first, on every dialect; never another buyer's or sale's, not
// even a buyer whose id differs by a trailing space (migration 0019), and
// the same holds for their orders.
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

// TestBuyerFailedReadUsesTheBuyerIndex: a buyer's failed orders are read
// through failed_orders_sale_user_idx (migration 0020), not by going
// through every failed order of the sale. With 2,000 failed orders of one
// sale over 1,000 buyers, and the table's statistics up to date, the
// plan of the read names that index on every dialect, unforced.
func TestBuyerFailedReadUsesTheBuyerIndex(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		var b strings.Builder
		for chunk := range 4 {
			b.Reset()
			b.WriteString(`INSERT INTO failed_orders (reservation_id, sale_id, user_id, qty, reason, attempts, created_at_ms) VALUES `)
			for i := range 500 {
				n := chunk*500 + i
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, `('tea.r%05d', 'tea', 'u%04d', 1, 'sold_out', 1, %d)`, n, n%1000, 1_700_000_000_000+n)
			}
			if _, err := db.write.ExecContext(ctx, b.String()); err != nil {
				t.Fatal(err)
			}
		}
		conn := analyzedConn(t, db, "failed_orders")
		text := explainPlan(t, conn, db.Dialect(), st.q.buyerFailed, "tea", "u0007")
		if !strings.Contains(text, "failed_orders_sale_user_idx") {
			t.Errorf("plan of a buyer's failed orders:\n%s\nwant failed_orders_sale_user_idx", text)
		}
		t.Logf("plan:\n%s", text)
		if got, err := st.BuyerFailedOrders(ctx, "tea", "u0007"); err != nil || len(got) != 2 {
			t.Fatalf("BuyerFailedOrders(tea, u0007) = %d rows, %v; want 2", len(got), err)
		}
	})
}
