package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/restore"
)

// TestRestoreStore runs the restore conformance suite on one database per
// dialect, shared by its subtests, as the suite allows.
func TestRestoreStore(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, st *OrderStore) {
		sales := NewSaleStore(db)
		conformance.RestoreStore(t, func(*testing.T) (seckill.SaleStore, seckill.OrderStore, restore.Store, conformance.LedgerStore) {
			return sales, st, st.Restores, st.Ledger
		})
	})
}

// countRequests counts the restore requests of a sale.
func countRequests(t *testing.T, db *DB, saleID string) int {
	t.Helper()
	return countRows(t, db, "restore_requests", saleID)
}

// park parks a restore of reservation id of sale tea, failing the test on
// an error.
func park(t *testing.T, st *OrderStore, id, reason string) {
	t.Helper()
	if _, err := st.Restores.ParkRestore(t.Context(), id, "tea", reason, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// wantRequestState checks the state of the restore request of reservation
// id.
func wantRequestState(t *testing.T, st *OrderStore, id string, want seckill.RestoreState) {
	t.Helper()
	if r, err := st.Restores.RestoreRequest(t.Context(), id); err != nil || r.State != want {
		t.Errorf("request = %+v, %v; want %s", r, err, want)
	}
}

// TestRestoreNeverAboveInitialStock: giving back units the sale already
// has is a bug somewhere; the restore fails and writes nothing rather than
// clamp the stock.
func TestRestoreNeverAboveInitialStock(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 5)
		evs := events("tea", 2)
		persist(t, st, "tea", evs)
		q := &db.dialect.sql.orders
		// The bug: the units are back already.
		if _, err := db.write.ExecContext(t.Context(), `UPDATE sales SET stock = 4 WHERE id = `+q.bind(1), "tea"); err != nil {
			t.Fatal(err)
		}
		_, stockVersion := saleRow(t, db, "tea")
		o, changed, err := st.Restores.RestoreOrder(t.Context(), evs[0].ReservationID, "operator", time.Now())
		if err == nil || errors.Is(err, seckill.ErrNotFound) || seckill.ErrorCode(err) != seckill.EINTERNAL {
			t.Fatalf("RestoreOrder over the initial stock = %+v, %v, %v; want an internal error", o, changed, err)
		}
		wantSale(t, db, "tea", 4, stockVersion)
		if o, err := st.Order(t.Context(), evs[0].ReservationID); err != nil || o.Status != seckill.OrderPlaced {
			t.Errorf("order after the failed restore = %+v, %v; want still ordered", o, err)
		}
		if n := countRequests(t, db, "tea"); n != 0 {
			t.Errorf("%d restore requests after the failed restore, want 0", n)
		}
	})
}

// TestParkBumpsVersion: parking bumps the sale's version (that is what
// makes a PersistReservations that read before it retry); returning an
// existing request writes nothing.
func TestParkBumpsVersion(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 5)
		id := events("tea", 1)[0].ReservationID
		park(t, st, id, "early")
		wantSale(t, db, "tea", 5, 2)
		park(t, st, id, "again")
		wantSale(t, db, "tea", 5, 2)
	})
}

// TestPersistRetriesAfterPark: a restore parked between a call's reads and
// its stock update is not missed: the park moved the version, the call
// starts over, and the order lands cancelled, taking no stock. SQLite is
// left out: with one writer at a time its reads cannot go stale.
func TestPersistRetriesAfterPark(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 3)
		evs := events("tea", 2, 1)
		var attempts []int
		st.beforeTakeStock = func(attempt int) {
			attempts = append(attempts, attempt)
			if attempt == 1 {
				if _, err := NewOrderStore(db).Restores.ParkRestore(t.Context(), evs[0].ReservationID, "tea", "early", time.Now()); err != nil {
					t.Error(err)
				}
			}
		}
		out := persist(t, st, "tea", evs)
		if got, want := outcomesString(out), "created created"; got != want {
			t.Errorf("outcomes %q, want %q", got, want)
		}
		if fmt.Sprint(attempts) != "[1 2]" {
			t.Errorf("attempts %v, want [1 2]", attempts)
		}
		if o, err := st.Order(t.Context(), evs[0].ReservationID); err != nil || o.Status != seckill.OrderCancelled || o.CancelReason != "early" {
			t.Errorf("order of the parked reservation = %+v, %v; want cancelled, reason early", o, err)
		}
		wantRequestState(t, st, evs[0].ReservationID, seckill.RestoreStateRedisPending)
		// Version 1, +1 by the park, +1 by the batch's retry.
		wantSale(t, db, "tea", 2, 3)
	})
}

// TestPersistParkedInvalidEvent: an event the writer rejects as invalid
// goes to failed_orders even when its restore was parked, and the request
// moves on to redis_pending, as RestoreOrder does for a failed order.
func TestPersistParkedInvalidEvent(t *testing.T) {
	db := openMigrated(t, dialects[0].url)
	st := NewOrderStore(db)
	createSale(t, db, "tea", 3)
	evs := events("tea", 0)
	park(t, st, evs[0].ReservationID, "early")
	out := persist(t, st, "tea", evs)
	if got := outcomesString(out); got != "rejected" {
		t.Errorf("outcomes %q, want rejected", got)
	}
	wantRequestState(t, st, evs[0].ReservationID, seckill.RestoreStateRedisPending)
	wantSale(t, db, "tea", 3, 3)
}

// TestUpdateRestoreNeverBackward: a step once done is never undone, so a
// request never moves back to an earlier state; a refused update changes
// nothing.
func TestUpdateRestoreNeverBackward(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 3)
		id := events("tea", 1)[0].ReservationID
		park(t, st, id, "early")
		steps := []struct {
			to   seckill.RestoreState
			code string // "" for success
		}{
			{seckill.RestoreStateParked, ""},
			{seckill.RestoreStateRedisPending, ""},
			{seckill.RestoreStateParked, seckill.ESTATECONFLICT},
			{seckill.RestoreStateRedisPending, ""},
			{seckill.RestoreStateDone, ""},
			{seckill.RestoreStateRedisPending, seckill.ESTATECONFLICT},
			{seckill.RestoreStateParked, seckill.ESTATECONFLICT},
			{seckill.RestoreStateDone, ""},
		}
		attempts := 0
		for i, s := range steps {
			err := st.Restores.UpdateRestore(ctx, id, s.to, "e", false, time.Now())
			if code := seckill.ErrorCode(err); code != s.code {
				t.Errorf("step %d: UpdateRestore(%s) = %v, want code %q", i, s.to, err, s.code)
			}
			if err == nil {
				attempts++
			}
			r, err := st.Restores.RestoreRequest(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Attempts != attempts {
				t.Errorf("step %d: %d attempts, want %d", i, r.Attempts, attempts)
			}
		}
	})
}

// TestRestoreText: reasons and errors are cut and cleaned like every other
// stored reason.
func TestRestoreText(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "tea", 3)
		id := events("tea", 1)[0].ReservationID
		long := "a\x00\xff" + strings.Repeat("b", 3000)
		want := "a\uFFFD\uFFFD" + strings.Repeat("b", maxReasonBytes-7)
		r, err := st.Restores.ParkRestore(ctx, id, "tea", long, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != want {
			t.Errorf("ParkRestore returned a reason of %d bytes, want %d", len(r.Reason), len(want))
		}
		if err := st.Restores.UpdateRestore(ctx, id, seckill.RestoreStateParked, long, false, time.Now()); err != nil {
			t.Fatal(err)
		}
		r, err = st.Restores.RestoreRequest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != want || r.LastError != want {
			t.Errorf("stored reason %d bytes, last error %d bytes; want both %d", len(r.Reason), len(r.LastError), len(want))
		}
	})
}

// TestRestoreSchema: the restore table has the indexes its queries need.
func TestRestoreSchema(t *testing.T) {
	wantIndexes(t, "restore_requests_state_created_idx", "restore_requests_sale_id_idx")
}

// TestParkHoldsOffPersist: a batch persisted while ParkRestore is between
// its reads (no order yet) and its write cannot land its order as ordered
// behind the park's back: the park holds the sale's row, the batch waits,
// then finds the version moved, retries and lands the order cancelled.
// SQLite is left out: its single writer serialises the two outright.
func TestParkHoldsOffPersist(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 3)
		evs := events("tea", 1)
		persisted := make(chan error, 1)
		st.Restores.beforePark = func() {
			st.Restores.beforePark = nil
			go func() {
				_, err := NewOrderStore(db).PersistReservations(t.Context(), "tea", evs, time.Now(), time.Minute)
				persisted <- err
			}()
			// Time for the batch to commit, were it not held off.
			time.Sleep(300 * time.Millisecond)
		}
		park(t, st, evs[0].ReservationID, "early")
		if err := <-persisted; err != nil {
			t.Fatal(err)
		}
		if o, err := st.Order(t.Context(), evs[0].ReservationID); err != nil || o.Status != seckill.OrderCancelled {
			t.Errorf("order = %+v, %v; want cancelled", o, err)
		}
		wantRequestState(t, st, evs[0].ReservationID, seckill.RestoreStateRedisPending)
		if stock, _ := saleRow(t, db, "tea"); stock != 3 {
			t.Errorf("stock %d, want 3", stock)
		}
	})
}

// TestDeadLetterSettlesParked: a reservation dead-lettered while its
// restore is parked will never land as an order; its request moves on to
// redis_pending at once, as RestoreOrder would move it.
func TestDeadLetterSettlesParked(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 3)
		id := events("tea", 1)[0].ReservationID
		park(t, st, id, "early")
		if err := st.RecordFailedOrder(t.Context(), &seckill.FailedOrder{ReservationID: id, SaleID: "tea", Reason: "gave up", Attempts: 5}); err != nil {
			t.Fatal(err)
		}
		wantRequestState(t, st, id, seckill.RestoreStateRedisPending)
		if _, changed, err := st.Restores.RestoreOrder(t.Context(), id, "operator", time.Now()); err != nil || changed {
			t.Errorf("RestoreOrder after = %v, %v; want unchanged, nil", changed, err)
		}
	})
}
