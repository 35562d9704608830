package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestOrderStore runs the conformance suite on one database per dialect,
// shared by its subtests, as the suite allows.
func TestOrderStore(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, st *OrderStore) {
		sales := NewSaleStore(db)
		conformance.OrderStore(t, func(*testing.T) (seckill.SaleStore, seckill.OrderStore) {
			return sales, st
		})
	})
}

// createSale creates a sale of stock units at 100 cents each.
func createSale(t *testing.T, db *DB, id string, stock int64) *seckill.Sale {
	t.Helper()
	s := &seckill.Sale{ID: id, Name: id, PriceCents: 100, Stock: stock, PurchaseLimit: 10,
		StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	if err := NewSaleStore(db).CreateSale(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// saleRow reads the unsold stock and version of a sale.
func saleRow(t *testing.T, db *DB, id string) (stock, version int64) {
	t.Helper()
	q := &db.dialect.sql.orders
	err := db.read.QueryRowContext(t.Context(), `SELECT stock, version FROM sales WHERE id = `+q.bind(1), id).Scan(&stock, &version)
	if err != nil {
		t.Fatalf("read sale %s: %v", id, err)
	}
	return stock, version
}

// countRows counts the rows of table (orders or failed_orders) of a sale.
func countRows(t *testing.T, db *DB, table, saleID string) int {
	t.Helper()
	q := &db.dialect.sql.orders
	var n int
	if err := db.read.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table+` WHERE sale_id = `+q.bind(1), saleID).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func wantSale(t *testing.T, db *DB, id string, stock, version int64) {
	t.Helper()
	if gotStock, gotVersion := saleRow(t, db, id); gotStock != stock || gotVersion != version {
		t.Errorf("sale %s has stock %d, version %d; want %d, %d", id, gotStock, gotVersion, stock, version)
	}
}

func events(saleID string, qtys ...int64) []seckill.ReservationEvent {
	evs := make([]seckill.ReservationEvent, len(qtys))
	for i, q := range qtys {
		evs[i] = seckill.ReservationEvent{ReservationID: seckill.NewReservationID(saleID, time.Now()),
			SaleID: saleID, UserID: fmt.Sprintf("u%d", i), Qty: q, ReservedAt: time.Now()}
	}
	return evs
}

// persist persists evs of a sale, due to be paid within a minute, failing
// the test on an error.
func persist(t *testing.T, st *OrderStore, saleID string, evs []seckill.ReservationEvent) []seckill.PersistOutcome {
	t.Helper()
	out, err := st.PersistReservations(t.Context(), saleID, evs, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func outcomesString(out []seckill.PersistOutcome) string {
	names := map[seckill.PersistOutcome]string{seckill.PersistCreated: "created", seckill.PersistDuplicate: "duplicate", seckill.PersistRejected: "rejected"}
	var s []string
	for _, o := range out {
		s = append(s, names[o])
	}
	return strings.Join(s, " ")
}

// TestPersistTakesStock: the sales row itself, which the conformance suite
// cannot see: stock taken exactly, one version bump per writing call, none
// for a call of duplicates only, and rejected events in failed_orders.
func TestPersistTakesStock(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 5)
		evs := events("tea", 2, 2, 2, 1)
		out := persist(t, st, "tea", evs)
		if got, want := outcomesString(out), "created created rejected created"; got != want {
			t.Errorf("outcomes %q, want %q", got, want)
		}
		wantSale(t, db, "tea", 0, 2)
		if n := countRows(t, db, "orders", "tea"); n != 3 {
			t.Errorf("%d orders, want 3", n)
		}
		if n := countRows(t, db, "failed_orders", "tea"); n != 1 {
			t.Errorf("%d failed orders, want 1", n)
		}

		// Redelivered: nothing written, not even a version bump.
		persist(t, st, "tea", evs)
		wantSale(t, db, "tea", 0, 2)
		// All rejected: stock untouched, but the read it rested on is
		// checked by a version bump.
		persist(t, st, "tea", events("tea", 1))
		wantSale(t, db, "tea", 0, 3)
		if n := countRows(t, db, "failed_orders", "tea"); n != 2 {
			t.Errorf("%d failed orders, want 2", n)
		}
	})
}

// TestPersistRetriesVersionConflict: a writer that commits between a
// call's reads and its stock update moves the version; the call starts
// over in a new transaction, sees the new stock, and succeeds. SQLite is
// left out: with one writer at a time its reads cannot go stale.
func TestPersistRetriesVersionConflict(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 3)
		other := NewOrderStore(db)
		var attempts []int
		st.beforeTakeStock = func(attempt int) {
			attempts = append(attempts, attempt)
			if attempt == 1 {
				// A competing writer takes 2 of the 3 units meanwhile.
				out, err := other.PersistReservations(t.Context(), "tea", events("tea", 2), time.Now(), time.Minute)
				if err != nil || out[0] != seckill.PersistCreated {
					t.Errorf("competing writer: %v, %v", out, err)
				}
			}
		}
		out := persist(t, st, "tea", events("tea", 1, 1))
		if got, want := outcomesString(out), "created rejected"; got != want {
			t.Errorf("outcomes %q, want %q (decided on the stock left after the competitor)", got, want)
		}
		if fmt.Sprint(attempts) != "[1 2]" {
			t.Errorf("attempts %v, want [1 2]", attempts)
		}
		if got := st.Conflicts(); got != 1 {
			t.Errorf("Conflicts() = %d, want 1 (the first attempt rolled back)", got)
		}
		if got := other.Conflicts(); got != 0 {
			t.Errorf("the competitor's Conflicts() = %d, want 0", got)
		}
		wantSale(t, db, "tea", 0, 3)
	})
}

// TestPersistGivesUp: a call that loses every round returns an error
// after its attempts, having written nothing.
func TestPersistGivesUp(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		// Every attempt optimistic: a locked one would make the hook's
		// update below wait for the call's own transaction.
		st.maxAttempts, st.maxBackoff, st.lockAfter = 3, time.Millisecond, 3
		createSale(t, db, "tea", 3)
		q := &db.dialect.sql.orders
		var calls atomic.Int32
		st.beforeTakeStock = func(int) {
			calls.Add(1)
			if _, err := db.write.ExecContext(t.Context(), `UPDATE sales SET version = version + 1 WHERE id = `+q.bind(1), "tea"); err != nil {
				t.Error(err)
			}
		}
		evs := events("tea", 1)
		_, err := st.PersistReservations(t.Context(), "tea", evs, time.Now(), time.Minute)
		if !errors.Is(err, errConflict) {
			t.Fatalf("PersistReservations = %v, want a conflict", err)
		}
		if calls.Load() != 3 {
			t.Errorf("%d attempts, want 3", calls.Load())
		}
		wantSale(t, db, "tea", 3, 4)
		if _, err := st.Order(t.Context(), evs[0].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Order after giving up = %v, want ErrNotFound", err)
		}
	})
}

// TestPersistLocksAfterLosing: a call that lost its first rounds to other
// writers locks the sale's row before its next reads, so that no writer
// can move the version under it again: in that round the row is locked
// (a locking read that will not wait is refused), where in the rounds
// before another writer's update went through and made the call start
// over.
func TestPersistLocksAfterLosing(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 3)
		var attempts []int
		st.beforeTakeStock = func(attempt int) {
			attempts = append(attempts, attempt)
			if attempt <= st.lockAfter {
				// Another writer wins this round.
				if _, err := db.write.ExecContext(ctx, (&db.dialect.sql.orders).bumpSaleVersion, "tea"); err != nil {
					t.Error(err)
				}
				return
			}
			// PostgreSQL and MariaDB both refuse at once, with a lock
			// error, a NOWAIT read of a row another transaction locks.
			var version int64
			err := db.write.QueryRowContext(ctx, `SELECT version FROM sales WHERE id = `+(&db.dialect.sql.orders).bind(1)+` FOR UPDATE NOWAIT`, "tea").Scan(&version)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "lock") {
				t.Errorf("a locking read of the sale during attempt %d: version %d, %v; want it refused, the row locked", attempt, version, err)
			}
		}
		out := persist(t, st, "tea", events("tea", 1))
		if got := outcomesString(out); got != "created" {
			t.Errorf("outcomes %q, want created", got)
		}
		if fmt.Sprint(attempts) != "[1 2 3]" {
			t.Errorf("attempts %v, want [1 2 3]", attempts)
		}
		if got := st.Conflicts(); got != 2 {
			t.Errorf("Conflicts() = %d, want 2 (the two rounds lost before the lock)", got)
		}
		// Version 1, +2 by the rounds lost, +1 by the take.
		wantSale(t, db, "tea", 2, 4)
	})
}

// TestPersistRetriesUniqueViolation: rows for the same reservations
// committed by someone else between a call's dedup read and its inserts
// make the inserts fail on the unique key; the call starts over and then
// counts them as duplicates.
func TestPersistRetriesUniqueViolation(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 1)
		evs := events("tea", 1, 1, 1) // created, rejected, created-by-other
		q := &db.dialect.sql.orders
		st.beforeTakeStock = func(attempt int) {
			if attempt != 1 {
				return
			}
			// A dead letter of evs[1] recorded meanwhile, and an order
			// of evs[2] inserted behind the store's back.
			if err := NewOrderStore(db).RecordFailedOrder(t.Context(), &seckill.FailedOrder{
				ReservationID: evs[1].ReservationID, SaleID: "tea", Reason: "dead letter", Attempts: 5,
			}); err != nil {
				t.Error(err)
			}
			_, err := db.write.ExecContext(t.Context(), q.insertOrders+q.tuples(1, orderInsertWidth),
				seckill.OrderIDOf(evs[2].ReservationID), evs[2].ReservationID, "tea", "u2", 1, 100, "ordered", 0, 0, 0, 0, nil)
			if err != nil {
				t.Error(err)
			}
		}
		out := persist(t, st, "tea", evs)
		if got, want := outcomesString(out), "created duplicate duplicate"; got != want {
			t.Errorf("outcomes %q, want %q", got, want)
		}
		// Version 1, +1 by the dead letter (which fails the store's
		// optimistic update), +1 by the order taken on the retry.
		wantSale(t, db, "tea", 0, 3)
		if f, err := st.FailedOrder(t.Context(), evs[1].ReservationID); err != nil || f.Reason != "dead letter" {
			t.Errorf("failed order of evs[1] = %+v, %v; want the dead letter's", f, err)
		}
	})
}

// TestPersistRedelivery: a batch's first attempt does not read which of
// its events have orders; the orders' key finds a redelivered one, and an
// attempt that would reject an event reads them before it decides. Neither
// counts as a lost race, and neither writes anything twice.
func TestPersistRedelivery(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 3)
		first := events("tea", 1, 1)
		if got, want := outcomesString(persist(t, st, "tea", first)), "created created"; got != want {
			t.Fatalf("first batch: outcomes %q, want %q", got, want)
		}
		// A new event behind a redelivered one: the insert fails on the
		// key, and the retry reads the order.
		fresh := events("tea", 1)
		fresh[0].UserID = "u9"
		if got, want := outcomesString(persist(t, st, "tea", append([]seckill.ReservationEvent{first[0]}, fresh...))), "duplicate created"; got != want {
			t.Errorf("redelivery with a new event: outcomes %q, want %q", got, want)
		}
		// Sold out in the database now: a redelivered event would be
		// refused for want of stock (its own order took it) if its order
		// went unread, and recorded as a failed order beside that order.
		if got, want := outcomesString(persist(t, st, "tea", first)), "duplicate duplicate"; got != want {
			t.Errorf("redelivery after the sale sold out: outcomes %q, want %q", got, want)
		}
		for _, e := range first {
			if _, err := st.FailedOrder(t.Context(), e.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
				t.Errorf("failed order of redelivered %s: %v, want ErrNotFound", e.ReservationID, err)
			}
		}
		if n := countRows(t, db, "orders", "tea"); n != 3 {
			t.Errorf("%d orders, want 3", n)
		}
		if n := countRows(t, db, "failed_orders", "tea"); n != 0 {
			t.Errorf("%d failed orders, want 0", n)
		}
		wantSale(t, db, "tea", 0, 3)
		if n := st.Conflicts(); n != 0 {
			t.Errorf("%d conflicts counted, want 0: a redelivery is not a lost race", n)
		}
	})
}

// TestPersistInvalidEvents: events the writer should never send. Bad user
// ids and quantities are rejected into failed_orders (their text made
// storable); events of another sale fail the call, writing nothing.
func TestPersistInvalidEvents(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 100)
		evs := events("tea", 0, -5, seckill.MaxPurchaseLimit+1, 1, 1, 1)
		evs[3].UserID = ""
		evs[4].UserID = "bad\x00\xff" + strings.Repeat("長", 200)
		out := persist(t, st, "tea", evs)
		if got, want := outcomesString(out), "rejected rejected rejected rejected rejected created"; got != want {
			t.Errorf("outcomes %q, want %q", got, want)
		}
		wantSale(t, db, "tea", 99, 2)
		for _, e := range evs[:5] {
			f, err := st.FailedOrder(ctx, e.ReservationID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(f.Reason, "invalid reservation event") || f.Qty != e.Qty {
				t.Errorf("failed order = %+v, want reason 'invalid reservation event…', qty %d", f, e.Qty)
			}
			if !utf8.ValidString(f.UserID) || len(f.UserID) > maxFailedTextBytes || strings.ContainsRune(f.UserID, 0) {
				t.Errorf("stored user id %q is not storable text", f.UserID)
			}
		}

		for name, mutate := range map[string]func(*seckill.ReservationEvent){
			"other sale's reservation": func(e *seckill.ReservationEvent) { e.ReservationID = seckill.NewReservationID("coffee", time.Now()) },
			"other sale id":            func(e *seckill.ReservationEvent) { e.SaleID = "coffee" },
			"malformed reservation id": func(e *seckill.ReservationEvent) { e.ReservationID = "tea.nope" },
		} {
			bad := events("tea", 1, 1)
			mutate(&bad[1])
			_, err := st.PersistReservations(ctx, "tea", bad, time.Now(), time.Minute)
			if code := seckill.ErrorCode(err); code != seckill.EINVALID {
				t.Errorf("%s: PersistReservations = %v, want EINVALID", name, err)
			}
			if _, err := st.Order(ctx, bad[0].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
				t.Errorf("%s: the good event was persisted: %v", name, err)
			}
		}
		if _, err := st.PersistReservations(ctx, "tea", events("tea", 1), time.Now(), 0); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("PersistReservations(pay timeout 0) = %v, want EINVALID", err)
		}
		if _, err := st.PersistReservations(ctx, "no such sale", nil, time.Now(), time.Minute); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("PersistReservations(malformed sale id) = %v, want ErrNotFound", err)
		}
		wantSale(t, db, "tea", 99, 2)
	})
}

// TestFailedOrderText: a failed order is never refused over its text:
// long reasons are cut, invalid UTF-8 and NUL replaced, on every dialect.
// Keys are compared byte for byte ("x" and "x " are two reservations, even
// under MySQL's padding collations); unkeyable ids are EINVALID.
func TestFailedOrderText(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, _ *DB, st *OrderStore) {
		ctx := t.Context()
		f := &seckill.FailedOrder{
			ReservationID: "x",
			SaleID:        strings.Repeat("s", 300),
			UserID:        "u\x00\xfe",
			Reason:        strings.Repeat("茶", 1000) + "\xff",
			Payload:       []byte("\x00\xff"),
		}
		if err := st.RecordFailedOrder(ctx, f); err != nil {
			t.Fatal(err)
		}
		got, err := st.FailedOrder(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("茶", maxReasonBytes/3); got.Reason != want {
			t.Errorf("reason of %d bytes stored as %d bytes, want cut to %d", len(f.Reason), len(got.Reason), len(want))
		}
		if got.SaleID != strings.Repeat("s", maxFailedTextBytes) || got.UserID != "u\uFFFD\uFFFD" {
			t.Errorf("stored sale id %d bytes, user id %q", len(got.SaleID), got.UserID)
		}
		if string(got.Payload) != "\x00\xff" {
			t.Errorf("payload %q, want it byte for byte", got.Payload)
		}
		if err := st.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: "x ", Reason: "r"}); err != nil {
			t.Errorf("RecordFailedOrder(%q) after %q: %v", "x ", "x", err)
		}
		if err := st.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: "x", Reason: "r"}); !errors.Is(err, seckill.ErrDuplicate) {
			t.Errorf("second RecordFailedOrder(x) = %v, want ErrDuplicate", err)
		}
		for _, id := range []string{"", strings.Repeat("r", 256), "\xff", "a\x00"} {
			if err := st.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: id, Reason: "r"}); seckill.ErrorCode(err) != seckill.EINVALID {
				t.Errorf("RecordFailedOrder(%q) = %v, want EINVALID", id, err)
			}
		}
	})
}

// TestCancelReasonText: cancel reasons are cut and cleaned like failure
// reasons.
func TestCancelReasonText(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 1)
		evs := events("tea", 1)
		persist(t, st, "tea", evs)
		o, changed, err := st.CancelOrder(t.Context(), evs[0].ReservationID, "a\x00"+strings.Repeat("b", 3000), time.Now())
		if err != nil || !changed {
			t.Fatalf("CancelOrder = %v, %v", changed, err)
		}
		if want := "a\uFFFD" + strings.Repeat("b", maxReasonBytes-4); o.CancelReason != want {
			t.Errorf("cancel reason stored as %q…, %d bytes; want %d", o.CancelReason[:8], len(o.CancelReason), len(want))
		}
	})
}

func TestListLimits(t *testing.T) {
	st := NewOrderStore(openMigrated(t, sqltest.SQLite))
	for _, limit := range []int{0, -1} {
		if _, err := st.ExpiredOrders(t.Context(), time.Now(), limit); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("ExpiredOrders(limit %d) = %v, want EINVALID", limit, err)
		}
		if _, _, err := st.FailedOrders(t.Context(), seckill.FailedOrderFilter{Limit: limit}); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("FailedOrders(limit %d) = %v, want EINVALID", limit, err)
		}
	}
}

// TestSQLitePersistTwoHandles: two handles on one file (two processes)
// persist overlapping batches of one sale at once: each event becomes one
// order, the stock sells exactly out, and no writer sees "database is
// locked".
func TestSQLitePersistTwoHandles(t *testing.T) {
	a, b := twoSQLiteHandles(t)
	createSale(t, a, "tea", 200)
	evs := events("tea", make([]int64, 200)...)
	for i := range evs {
		evs[i].Qty = 1
	}
	var (
		wg      sync.WaitGroup
		created atomic.Int64
		mu      sync.Mutex
		errs    []error
	)
	for h, db := range []*DB{a, b} {
		st := NewOrderStore(db)
		for g := range 4 {
			wg.Go(func() {
				// Every goroutine sees every event, in batches of 20
				// starting at its own offset.
				for k := range 10 {
					from := ((h*4+g)*20 + k*20) % len(evs)
					out, err := st.PersistReservations(t.Context(), "tea", evs[from:from+20], time.Now(), time.Minute)
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						continue
					}
					for _, o := range out {
						if o == seckill.PersistCreated {
							created.Add(1)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("PersistReservations: %v", err)
	}
	if created.Load() != 200 {
		t.Errorf("%d created, want 200", created.Load())
	}
	if n := countRows(t, a, "orders", "tea"); n != 200 {
		t.Errorf("%d orders, want 200", n)
	}
	if stock, _ := saleRow(t, a, "tea"); stock != 0 {
		t.Errorf("stock %d, want 0", stock)
	}
}

// TestOrderSchema: the order tables have the indexes their queries need.
func TestOrderSchema(t *testing.T) {
	wantIndexes(t, "orders_status_pay_by_idx", "orders_sale_user_idx", "failed_orders_created_idx", "failed_orders_sale_created_idx", "failed_orders_sale_user_idx")
}

// TestHeldByUsesIndex: the per-buyer read of every batch seeks the buyers'
// orders instead of visiting every order of the sale (which made a sale's
// writes slower the more it had sold).
func TestHeldByUsesIndex(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	id := seckill.NewReservationID("tea", time.Now())
	got := sqlitePlan(t, db, NewOrderStore(db).q.batchReadsOf(1, false, true), "tea", id, "tea", id, "tea", "tea", "u1")
	if !strings.Contains(got, "orders_sale_user_idx (sale_id=? AND user_id=?)") {
		t.Errorf("plan of the held-by read: %s; want a search of orders_sale_user_idx on sale_id and user_id", got)
	}
}

// TestBatchReadsPlan: the writer's batch read finds each part's rows by an
// index, and asks whether the sale has failed orders or restore requests
// at all by an index on sale_id, not a scan of either table.
func TestBatchReadsPlan(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	id := seckill.NewReservationID("tea", time.Now())
	got := sqlitePlan(t, db, NewOrderStore(db).q.batchReadsOf(1, true, true), "tea", id, id, "tea", id, "tea", "tea", "u1")
	for _, want := range []string{
		"SEARCH orders USING COVERING INDEX sqlite_autoindex_orders_1 (reservation_id=?)",
		// Either index that leads with sale_id serves; SQLite takes the
		// smaller, the buyers' (0020).
		"SEARCH failed_orders EXISTS USING COVERING INDEX failed_orders_sale_user_idx (sale_id=?); " +
			"SEARCH failed_orders USING COVERING INDEX sqlite_autoindex_failed_orders_1 (reservation_id=?)",
		"SEARCH restore_requests EXISTS USING COVERING INDEX restore_requests_sale_id_idx (sale_id=?); " +
			"SEARCH restore_requests USING INDEX sqlite_autoindex_restore_requests_1 (reservation_id=?)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan of the batch read: %s; want %q", got, want)
		}
	}
	if strings.Contains(got, "SCAN") {
		t.Errorf("plan of the batch read scans a table: %s", got)
	}
}

// TestFailedPagesPlan: a page of one sale's failed orders is a range of
// failed_orders_sale_created_idx read in the list's order, from the
// cursor on: no sort of the sale's failed orders, however many it has.
func TestFailedPagesPlan(t *testing.T) {
	st := NewOrderStore(openMigrated(t, sqltest.SQLite))
	cursor := encodeKeyCursor(1234, "tea.x")
	for _, f := range []seckill.FailedOrderFilter{
		{SaleID: "tea", Limit: 50},
		{SaleID: "tea", Limit: 50, Before: cursor},
		{SaleID: "tea", State: seckill.FailedOpen, Limit: 50, Before: cursor},
	} {
		q, args, err := st.failedPageQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		got := sqlitePlan(t, st.db, q, args...)
		if !strings.Contains(got, "SEARCH failed_orders USING INDEX failed_orders_sale_created_idx (sale_id=?") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("plan of %+v: %s; want a search of failed_orders_sale_created_idx and no sort", f, got)
		}
	}
}

func TestStorableText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"", 10, ""},
		{"plain", 10, "plain"},
		{"plain", 3, "pla"},
		{"茶茶", 5, "茶"}, // 6 bytes: cut before the second, not inside it
		{"茶茶", 6, "茶茶"},
		{"a\x00b", 10, "a\uFFFDb"},
		{"a\xffb", 10, "a\uFFFDb"},
		{"\xff\xfe", 3, "\uFFFD"},
	}
	for _, tt := range tests {
		if got := storableText(tt.in, tt.max); got != tt.want {
			t.Errorf("storableText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestFailedOrderResolver(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, st *OrderStore) {
		conformance.FailedOrderResolver(t, func(*testing.T) conformance.ResolverStores {
			return conformance.ResolverStores{Sales: NewSaleStore(db), Orders: st, Restores: st.Restores, Resolver: st}
		})
	})
}

// TestPersistPreparesOnce: the writer's statements are prepared once, and
// batches of every size between 1 and 300 use only those few texts (runs
// of power-of-two rows, IN lists padded to a power of two), each batch's
// orders landing intact.
func TestPersistPreparesOnce(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "prep", 100_000)
		want := len(st.writerQueries())
		total := 0
		for n := 1; n <= 300; n += 37 {
			qtys := make([]int64, n)
			for i := range qtys {
				qtys[i] = 1
			}
			out, err := st.PersistReservations(t.Context(), "prep", events("prep", qtys...), time.Now(), time.Minute)
			if err != nil {
				t.Fatalf("batch of %d: %v", n, err)
			}
			for i, o := range out {
				if o != seckill.PersistCreated {
					t.Fatalf("batch of %d: event %d %v", n, i, o)
				}
			}
			total += n
		}
		if got := countRows(t, db, "orders", "prep"); got != total {
			t.Errorf("%d orders; want %d", got, total)
		}
		texts := 0
		st.stmts.Range(func(any, any) bool { texts++; return true })
		if texts != want {
			t.Errorf("%d prepared statements after batches of 1 to 300; want the %d prepared up front, no more", texts, want)
		}
	})
}

// TestInsertRunsArePrepared: every run a batch of new orders is cut into
// is one of the statement texts prepared before the first transaction,
// and the runs cover the batch.
func TestInsertRunsArePrepared(t *testing.T) {
	st := &OrderWriter{orderDB: &orderDB{q: &sqliteSQL.orders, rq: &sqliteSQL.restores}}
	prepared := map[string]bool{}
	for _, q := range st.writerQueries() {
		prepared[q] = true
	}
	for n := 1; n <= 3*placedChunk; n++ {
		runs := 0
		for left := n; left > 0; runs++ {
			r := placedRunLen(left)
			if r < 1 || r > left {
				t.Fatalf("batch of %d: a run of %d with %d left", n, r, left)
			}
			if !prepared[st.q.insertOrders+st.q.tuples(r, orderInsertWidth)] {
				t.Fatalf("batch of %d: a run of %d is not a prepared text", n, r)
			}
			left -= r
		}
		if n <= placedChunk && runs > 6 {
			t.Errorf("batch of %d takes %d statements, want at most 6", n, runs)
		}
	}
}
