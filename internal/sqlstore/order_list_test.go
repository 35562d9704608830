package sqlstore

import (
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestOrderPage: a sale's orders a page at a time by key, on every
// dialect (and a PostgreSQL whose collation is not byte order): every
// order once, in reservation id order, never another sale's; a status
// filter; orders written between pages come after, never shifting a row
// into a second page; cursors it did not make are refused.
func TestOrderPage(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 100)
		createSale(t, db, "te", 100) // a sale id that prefixes the other
		evs := events("tea", slices.Repeat([]int64{1}, 23)...)
		persist(t, st, "tea", evs)
		persist(t, st, "te", events("te", 1, 1, 1))
		paid := map[string]bool{}
		for i, e := range evs {
			if i%3 == 0 {
				if _, err := st.PayOrder(ctx, e.ReservationID, time.Now()); err != nil {
					t.Fatal(err)
				}
				paid[e.ReservationID] = true
			}
		}
		var want []string
		for _, e := range evs {
			want = append(want, e.ReservationID)
		}
		slices.Sort(want) // byte order

		read := func(status seckill.OrderStatus, limit int, between func()) []string {
			var got []string
			for cursor, pages := "", 0; ; pages++ {
				page, next, err := st.OrderPage(ctx, seckill.OrderFilter{SaleID: "tea", Status: status, Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("page of %d, limit %d", len(page), limit)
				}
				for _, o := range page {
					if o.SaleID != "tea" || (status != "" && o.Status != status) {
						t.Fatalf("order %+v in a page of tea's %q orders", o, status)
					}
					got = append(got, o.ReservationID)
				}
				if next == "" {
					return got
				}
				if pages == 0 && between != nil {
					between()
				}
				cursor = next
			}
		}
		if got := read("", 5, nil); !slices.Equal(got, want) {
			t.Fatalf("pages of 5:\n got %v\nwant %v", got, want)
		}
		if got := read("", 1000, nil); !slices.Equal(got, want) {
			t.Fatalf("one page: %d orders, want %d", len(got), len(want))
		}
		var wantPaid []string
		for _, id := range want {
			if paid[id] {
				wantPaid = append(wantPaid, id)
			}
		}
		if got := read(seckill.OrderPaid, 2, nil); !slices.Equal(got, wantPaid) {
			t.Fatalf("paid pages:\n got %v\nwant %v", got, wantPaid)
		}
		if got := read(seckill.OrderRefunded, 2, nil); len(got) != 0 {
			t.Fatalf("refunded: %v", got)
		}
		// Orders that land between two pages come at the end: nothing read
		// twice, nothing skipped.
		late := events("tea", 1, 1)
		got := read("", 4, func() { persist(t, st, "tea", late) })
		wantAll := append(slices.Clone(want), late[0].ReservationID, late[1].ReservationID)
		slices.Sort(wantAll)
		if !slices.Equal(got, wantAll) {
			t.Fatalf("with orders landing meanwhile:\n got %v\nwant %v", got, wantAll)
		}

		other := base64.RawURLEncoding.EncodeToString([]byte(seckill.NewReservationID("te", time.Now())))
		for _, f := range []seckill.OrderFilter{
			{SaleID: "tea", Limit: 0}, {SaleID: "tea", Limit: seckill.MaxOrderPage + 1},
			{SaleID: "tea", Limit: 1, Status: "bogus"}, {SaleID: "", Limit: 1},
			{SaleID: "tea", Limit: 1, Cursor: "nope!"}, {SaleID: "tea", Limit: 1, Cursor: other},
			{SaleID: "tea", Limit: 1, Cursor: base64.RawURLEncoding.EncodeToString([]byte("tea.\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"))},
		} {
			if _, _, err := st.OrderPage(ctx, f); seckill.ErrorCode(err) != seckill.EINVALID {
				t.Errorf("OrderPage(%+v) = %v, want EINVALID", f, err)
			}
		}
		if page, next, err := st.OrderPage(ctx, seckill.OrderFilter{SaleID: "nosuch", Limit: 10}); err != nil || len(page) != 0 || next != "" {
			t.Fatalf("a sale without orders: %v %q %v", page, next, err)
		}
	})
}

// TestOrderPagePlan: a page is a range of the primary key on SQLite, not
// a scan of the sale's orders.
func TestOrderPagePlan(t *testing.T) {
	db := openMigrated(t, dialects[0].url)
	st := NewOrderStore(db)
	for _, byStatus := range []bool{false, true} {
		args := []any{"tea", "tea.", "tea/"}
		if byStatus {
			args = append(args, "paid")
		}
		args = append(args, 10)
		query := st.q.orderPage
		if byStatus {
			query = st.q.orderPageByStatus
		}
		got := sqlitePlan(t, db, query, args...)
		if want := "SEARCH orders USING INDEX sqlite_autoindex_orders_1 (reservation_id>? AND reservation_id<?)"; got != want {
			t.Errorf("plan (by status %v): %s, want %s", byStatus, got, want)
		}
	}
}
