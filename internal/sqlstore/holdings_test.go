package sqlstore

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestHeldByUsesIndexPostgres: on PostgreSQL the per-buyer read seeks each
// buyer's orders, even under a generic plan of a table whose statistics
// say it is small (once, it scanned every order of the sale per batch:
// 30 ms a batch at 25,600 orders).
func TestHeldByUsesIndexPostgres(t *testing.T) {
	db := openMigrated(t, sqltest.Postgres)
	conn, err := db.write.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	id := seckill.NewReservationID("tea", time.Now())
	rows, err := conn.QueryContext(t.Context(), "EXPLAIN "+NewOrderStore(db).q.batchReadsOf(1, false, true),
		"tea", id, "tea", id, "tea", "tea", []string{"u1"})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	got := strings.Join(plan, "\n")
	if !strings.Contains(got, "orders_sale_user_idx") || !strings.Contains(got, "user_id = b.user_id") {
		t.Errorf("plan of the held-by read:\n%s\nwant a search of orders_sale_user_idx on sale_id and user_id per buyer", got)
	}
}

// createTea creates the sale "tea" of 100 units, open now, limit units
// a buyer.
func createTea(t *testing.T, db *DB, limit int64) {
	t.Helper()
	sale := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: 100, PurchaseLimit: limit,
		StartAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour)}
	if err := NewSaleStore(db).CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
}

// TestHoldingsKeptOnlyWhileExact: a store keeps a sale's holdings from its
// first order on and answers the limit from them, and drops them when
// another writer moved the sale; either way the limit holds.
func TestHoldingsKeptOnlyWhileExact(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createTea(t, db, 2)
		other := NewOrderStore(db) // a writer in another process
		persist := func(st *OrderStore, user string, qty int64) seckill.PersistOutcome {
			t.Helper()
			ev := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
				UserID: user, Qty: qty, ReservedAt: time.Now()}
			out, err := st.PersistReservations(t.Context(), "tea", []seckill.ReservationEvent{ev}, time.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return out[0]
		}
		if got := persist(st, "ann", 1); got != seckill.PersistCreated {
			t.Fatalf("ann's first unit: %v", got)
		}
		if !st.held.known("tea") {
			t.Fatal("holdings not kept after the sale's first order")
		}
		if got := persist(st, "ann", 2); got != seckill.PersistOverLimit {
			t.Errorf("ann's 1 + 2 of limit 2 from the holdings: %v, want over limit", got)
		}
		if got := persist(other, "bob", 2); got != seckill.PersistCreated {
			t.Fatalf("bob's units through another store: %v", got)
		}
		if got := persist(st, "bob", 1); got != seckill.PersistOverLimit {
			t.Errorf("bob's third unit after another store sold him 2: %v, want over limit", got)
		}
		if st.held.known("tea") {
			t.Error("holdings still kept after another store moved the sale")
		}
		if got := persist(st, "ann", 1); got != seckill.PersistCreated {
			t.Errorf("ann's second unit: %v", got)
		}
	})
}

// TestHoldingsCountingTooMuchAreRechecked: holdings count a cancelled
// order still (a cancel does not move the sale's version), so the limit
// they refuse is checked again against the database, which lets it
// through.
func TestHoldingsCountingTooMuchAreRechecked(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createTea(t, db, 1)
		first := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
			UserID: "ann", Qty: 1, ReservedAt: time.Now()}
		if _, err := st.PersistReservations(t.Context(), "tea", []seckill.ReservationEvent{first}, time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CancelOrder(t.Context(), first.ReservationID, "changed my mind", time.Now()); err != nil {
			t.Fatal(err)
		}
		again := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
			UserID: "ann", Qty: 1, ReservedAt: time.Now()}
		out, err := st.PersistReservations(t.Context(), "tea", []seckill.ReservationEvent{again}, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if out[0] != seckill.PersistCreated {
			t.Errorf("ann's unit after her first order was cancelled: %v, want created", out[0])
		}
	})
}

// TestHoldingsBounded: a sale whose buyers pass the bound is dropped.
func TestHoldingsBounded(t *testing.T) {
	h := holdings{max: 1000}
	orders := make([]*seckill.Order, h.max)
	for i := range orders {
		orders[i] = &seckill.Order{UserID: fmt.Sprint("u", i), Qty: 1}
	}
	h.committed("tea", 1, orders)
	if !h.known("tea") {
		t.Fatal("a sale of as many buyers as the bound dropped")
	}
	h.committed("tea", 2, []*seckill.Order{{UserID: "one-more", Qty: 1}})
	if h.known("tea") || h.entries != 0 {
		t.Errorf("a sale past the bound kept (%d entries)", h.entries)
	}
	h.committed("tea", 3, orders[:1])
	if h.known("tea") {
		t.Error("holdings restarted on a sale past its first order")
	}
}

// TestSaleStateReadListsWhenTheSaleHasThem: a store that keeps a sale's
// holdings reads only the sale's row for a batch while the sale has no
// failed order and no restore request; once it has one, the batch's ids
// are looked up again, even when nothing moved the sale's version. Here
// a restore request is slipped in without moving it: the order of its
// reservation must land cancelled (its restore was asked for first).
func TestSaleStateReadListsWhenTheSaleHasThem(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createTea(t, db, 5)
		event := func(user string) seckill.ReservationEvent {
			return seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
				UserID: user, Qty: 1, ReservedAt: time.Now()}
		}
		if out := persist(t, st, "tea", []seckill.ReservationEvent{event("ann")}); out[0] != seckill.PersistCreated {
			t.Fatalf("ann's order: %v", out[0])
		}
		if _, listing := st.listing.Load("tea"); listing || !st.held.known("tea") {
			t.Fatalf("after the sale's first order: listing %v, holdings kept %v; want the sale's row alone read", listing, st.held.known("tea"))
		}
		_, before := saleRow(t, db, "tea")
		parked := event("bob")
		now := toMillis(time.Now())
		if _, err := db.write.ExecContext(t.Context(), st.rq.insertRequest, parked.ReservationID, "tea", "changed my mind",
			string(seckill.RestoreStateParked), int64(0), "", nil, now, now); err != nil {
			t.Fatal(err)
		}
		if _, after := saleRow(t, db, "tea"); after != before {
			t.Fatalf("the request moved the sale's version %d -> %d; the test needs it unmoved", before, after)
		}
		if out := persist(t, st, "tea", []seckill.ReservationEvent{parked, event("cy")}); out[0] != seckill.PersistCreated || out[1] != seckill.PersistCreated {
			t.Fatalf("bob's and cy's orders: %s", outcomesString(out))
		}
		if o, err := st.Order(t.Context(), parked.ReservationID); err != nil {
			t.Fatal(err)
		} else if o.Status != seckill.OrderCancelled {
			t.Errorf("the order of a reservation whose restore was parked landed %s, want cancelled", o.Status)
		}
		if _, listing := st.listing.Load("tea"); !listing {
			t.Error("the sale has a restore request, yet its batches would not list their ids")
		}
	})
}

// TestHoldingsMemory: a buyer kept costs a hash and a count, not a copy of
// their id: at most 40 bytes each (23.6 measured; a map of these 18-byte
// ids as strings took 58.9), so that maxHeldEntries buyers fit in some
// 70 MB.
func TestHoldingsMemory(t *testing.T) {
	const n = 200_000
	orders := make([]*seckill.Order, n)
	for i := range orders {
		orders[i] = &seckill.Order{UserID: fmt.Sprintf("buyer-%012d", i), Qty: 1}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := holdings{}
	h.committed("tea", 1, orders)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if !h.known("tea") || h.entries != n {
		t.Fatalf("holdings of %d buyers: known %v, %d entries", n, h.known("tea"), h.entries)
	}
	perBuyer := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes a buyer", perBuyer)
	if perBuyer > 40 {
		t.Errorf("%.1f bytes a buyer kept; want at most 40", perBuyer)
	}
	runtime.KeepAlive(orders)
}

// TestHoldingsSharedHash: buyers whose ids hash alike share a count, which
// only counts too much: a store whose every buyer collides refuses bob's
// first unit on the holdings' word (ann's unit, limit 1), and persist's
// recheck reads the database and creates it. Nobody goes over the limit:
// ann's second unit is still refused.
func TestHoldingsSharedHash(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createTea(t, db, 1)
		st.held.hash = func(string) uint64 { return 7 }
		event := func(user string) seckill.ReservationEvent {
			return seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea",
				UserID: user, Qty: 1, ReservedAt: time.Now()}
		}
		persist := func(e seckill.ReservationEvent) seckill.PersistOutcome {
			t.Helper()
			out, err := st.PersistReservations(t.Context(), "tea", []seckill.ReservationEvent{e}, time.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return out[0]
		}
		if got := persist(event("ann")); got != seckill.PersistCreated {
			t.Fatalf("ann's unit: %v, want created", got)
		}
		if !st.held.known("tea") {
			t.Fatal("the store keeps no holdings of the sale: the collision is not exercised")
		}
		if held, ok := st.held.at("tea", 2, []string{"bob"}); !ok || held["bob"] != 1 {
			t.Fatalf("bob's count before his order: %v, %v; want ann's 1 (a shared hash)", held, ok)
		}
		if got := persist(event("bob")); got != seckill.PersistCreated {
			t.Errorf("bob's first unit, refused on a shared count: %v, want created after the recheck", got)
		}
		if got := persist(event("ann")); got == seckill.PersistCreated {
			t.Errorf("ann's second unit over the limit of 1: created")
		}
	})
}
