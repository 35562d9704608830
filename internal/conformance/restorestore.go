package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/restore"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// restoreStores returns the stores of one database: sales, orders,
// restores and the ledger.
type restoreStores = func(t *testing.T) (seckill.SaleStore, seckill.OrderStore, restore.Store, LedgerStore)

// LedgerStore reads a sale's whole database ledger, which this suite checks
// restores against (internal/sqlstore); reconciliation reads it by pages.
type LedgerStore interface {
	SaleLedger(ctx context.Context, saleID string) (*seckill.SaleLedger, error)
}

// RestoreStore runs the conformance suite of restore.Store and
// LedgerStore against the stores newStores returns: a sale store
// and an order store, to make the sales and orders that restores act on,
// and the restore and ledger stores of the same database. newStores is
// called once per subtest and returns stores ready for use (migrated); it
// may return fresh stores each time or share them: every subtest uses
// sale and reservation ids of its own and ignores rows it did not create.
//
// The suite sees the database's unsold stock as the sale store's
// Sale.Unsold, and its optimistic-lock counter as Sale.Version.
func RestoreStore(t *testing.T, newStores func(t *testing.T) (seckill.SaleStore, seckill.OrderStore, restore.Store, LedgerStore)) {
	t.Run("RestoreOrdered", func(t *testing.T) { testRestoreOrdered(t, newStores) })
	t.Run("ConcurrentRestores", func(t *testing.T) { testConcurrentRestores(t, newStores) })
	t.Run("RestorePayRace", func(t *testing.T) { testRestorePayRace(t, newStores) })
	t.Run("RestorePaid", func(t *testing.T) { testRestorePaid(t, newStores) })
	t.Run("RestoreCancelled", func(t *testing.T) { testRestoreCancelled(t, newStores) })
	t.Run("RestoreFailedOrder", func(t *testing.T) { testRestoreFailedOrder(t, newStores) })
	t.Run("RestoreNotFound", func(t *testing.T) { testRestoreNotFound(t, newStores) })
	t.Run("ParkThenPersist", func(t *testing.T) { testParkThenPersist(t, newStores) })
	t.Run("ParkAfterOrder", func(t *testing.T) { testParkAfterOrder(t, newStores) })
	t.Run("ParkRacesPersist", func(t *testing.T) { testParkRacesPersist(t, newStores) })
	t.Run("UpdateRestore", func(t *testing.T) { testUpdateRestore(t, newStores) })
	t.Run("RestoreRequests", func(t *testing.T) { testRestoreRequests(t, newStores) })
	t.Run("SaleLedger", func(t *testing.T) { testSaleLedger(t, newStores) })
	t.Run("LedgerPages", func(t *testing.T) { testLedgerPages(t, newStores) })
	t.Run("RestoreOrdersMatchesOneByOne", func(t *testing.T) { testRestoreOrdersMatchesOneByOne(t, newStores) })
	t.Run("RestoreOrdersLargeBatch", func(t *testing.T) { testRestoreOrdersLargeBatch(t, newStores) })
	t.Run("FinishRestores", func(t *testing.T) { testFinishRestores(t, newStores) })
}

// saleStock returns the database's unsold stock and version of a sale.
func saleStock(t *testing.T, sales seckill.SaleStore, id string) (unsold, version int64) {
	t.Helper()
	s, err := sales.Sale(t.Context(), id)
	if err != nil {
		t.Fatalf("Sale(%s): %v", id, err)
	}
	return s.Unsold, s.Version
}

// wantStock checks a sale's unsold stock and version.
func wantStock(t *testing.T, sales seckill.SaleStore, id string, unsold, version int64) {
	t.Helper()
	if gotUnsold, gotVersion := saleStock(t, sales, id); gotUnsold != unsold || gotVersion != version {
		t.Errorf("sale has Unsold %d, Version %d; want %d, %d", gotUnsold, gotVersion, unsold, version)
	}
}

// wantRequest reads a reservation's restore request and checks it against
// want; a zero want.AlertedAt means not alerted.
func wantRequest(t *testing.T, rs restore.Store, want seckill.RestoreRequest) *seckill.RestoreRequest {
	t.Helper()
	got, err := rs.RestoreRequest(t.Context(), want.ReservationID)
	if err != nil {
		t.Fatalf("RestoreRequest(%s): %v", want.ReservationID, err)
	}
	checkRequest(t, got, want)
	return got
}

func checkRequest(t *testing.T, got *seckill.RestoreRequest, want seckill.RestoreRequest) {
	t.Helper()
	if got.ReservationID != want.ReservationID || got.SaleID != want.SaleID || got.Reason != want.Reason ||
		got.State != want.State || got.Attempts != want.Attempts || got.LastError != want.LastError {
		t.Errorf("restore request = %+v, want %+v", *got, want)
	}
	checkStoredTime(t, "request CreatedAt", got.CreatedAt, want.CreatedAt)
	checkStoredTime(t, "request UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	if want.AlertedAt.IsZero() {
		if !got.AlertedAt.IsZero() {
			t.Errorf("request AlertedAt = %v, want zero (not alerted)", got.AlertedAt)
		}
	} else {
		checkStoredTime(t, "request AlertedAt", got.AlertedAt, want.AlertedAt)
	}
}

// wantNoRequest checks that a reservation has no restore request.
func wantNoRequest(t *testing.T, rs restore.Store, reservationID string) {
	t.Helper()
	if r, err := rs.RestoreRequest(t.Context(), reservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("RestoreRequest(%s) = %+v, %v; want ErrNotFound", reservationID, r, err)
	}
}

// wantOrderStatus checks a reservation's order status and cancel reason.
func wantOrderStatus(t *testing.T, orders seckill.OrderStore, reservationID string, status seckill.OrderStatus, reason string) *seckill.Order {
	t.Helper()
	o, err := orders.Order(t.Context(), reservationID)
	if err != nil {
		t.Fatalf("Order(%s): %v", reservationID, err)
	}
	if o.Status != status || o.CancelReason != reason {
		t.Errorf("order of %s is {%s, %q}, want {%s, %q}", reservationID, o.Status, o.CancelReason, status, reason)
	}
	return o
}

// testRestoreOrdered: restoring an order still ordered cancels it with the
// reason, gives its qty back to the sale's stock with one version bump,
// and records the request as redis_pending; a second restore changes
// nothing.
func testRestoreOrdered(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 250)
	now := time.Now()
	e := orderEvents(s.ID, now, 3)[0]
	wantOutcomes(t, persist(t, orders, s.ID, []seckill.ReservationEvent{e}, now), all(seckill.PersistCreated))
	unsold, version := saleStock(t, sales, s.ID)
	if unsold != 7 {
		t.Fatalf("after an order of 3 from 10, Unsold = %d, want 7", unsold)
	}

	at := now.Add(time.Minute)
	reason := "operator: wrong price — 价格错误"
	o, changed, err := rs.RestoreOrder(ctx, e.ReservationID, reason, at)
	if err != nil || !changed {
		t.Fatalf("RestoreOrder = %v, %v; want changed", changed, err)
	}
	if o == nil || o.ReservationID != e.ReservationID || o.Qty != 3 || o.Status != seckill.OrderCancelled || o.CancelReason != reason {
		t.Fatalf("RestoreOrder returned %+v, want the order of 3, cancelled with reason %q", o, reason)
	}
	checkStoredTime(t, "UpdatedAt after restore", o.UpdatedAt, at)
	checkStoredTime(t, "CreatedAt after restore", o.CreatedAt, now)
	wantStock(t, sales, s.ID, 10, version+1)
	wantOrderStatus(t, orders, e.ReservationID, seckill.OrderCancelled, reason)
	req := seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: reason,
		State: seckill.RestoreStateRedisPending, CreatedAt: at, UpdatedAt: at}
	wantRequest(t, rs, req)
	_, err = orders.PayOrder(ctx, e.ReservationID, at)
	wantCode(t, "PayOrder of a restored order", err, seckill.ESTATECONFLICT)

	// Again, later, for another reason: nothing changes.
	o, changed, err = rs.RestoreOrder(ctx, e.ReservationID, "pay timeout", at.Add(time.Minute))
	if err != nil || changed {
		t.Fatalf("second RestoreOrder = %v, %v; want unchanged, nil", changed, err)
	}
	if o == nil || o.Status != seckill.OrderCancelled || o.CancelReason != reason {
		t.Errorf("second RestoreOrder returned %+v, want the order cancelled with the first reason", o)
	}
	wantStock(t, sales, s.ID, 10, version+1)
	wantRequest(t, rs, req)
	// A redelivery of the event creates nothing and takes nothing.
	wantOutcomes(t, persist(t, orders, s.ID, []seckill.ReservationEvent{e}, at), all(seckill.PersistDuplicate))
	wantStock(t, sales, s.ID, 10, version+1)
}

// testConcurrentRestores: twenty restores of one order at once: exactly
// one changes it, and the stock comes back once.
func testConcurrentRestores(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	for round := range 3 {
		e := orderEvents(s.ID, now, 2)[0]
		wantOutcomes(t, persist(t, orders, s.ID, []seckill.ReservationEvent{e}, now), all(seckill.PersistCreated))
		unsold, version := saleStock(t, sales, s.ID)
		const n = 20
		var (
			changed = make([]bool, n)
			errs    = make([]error, n)
		)
		atOnce(n, func(i int) {
			_, changed[i], errs[i] = rs.RestoreOrder(ctx, e.ReservationID, fmt.Sprintf("restore %d", i), now.Add(time.Second))
		})
		wins, winner := 0, -1
		for i := range n {
			if errs[i] != nil {
				t.Errorf("round %d: RestoreOrder %d: %v", round, i, errs[i])
			} else if changed[i] {
				wins++
				winner = i
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d restores changed the order, want exactly 1", round, wins)
		}
		wantStock(t, sales, s.ID, unsold+2, version+1)
		reason := fmt.Sprintf("restore %d", winner)
		wantOrderStatus(t, orders, e.ReservationID, seckill.OrderCancelled, reason)
		wantRequest(t, rs, seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: reason,
			State: seckill.RestoreStateRedisPending, CreatedAt: now.Add(time.Second), UpdatedAt: now.Add(time.Second)})
	}
}

// testRestorePayRace: payments and restores of one order race; exactly
// one call wins, and the stock agrees with the winner.
func testRestorePayRace(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	for round := range 3 {
		e := persistOne(t, orders, s, now)
		unsold, version := saleStock(t, sales, s.ID)
		race := payRace(t, round, orders, e.ReservationID, now.Add(time.Second), func(at time.Time) (bool, error) {
			_, changed, err := rs.RestoreOrder(ctx, e.ReservationID, "buyer", at)
			return changed, err
		})
		payWins, restoreWins, errs := race.payWins, race.otherWins, race.errs
		if payWins+restoreWins != 1 {
			t.Fatalf("round %d: %d payments and %d restores won, want exactly one winner", round, payWins, restoreWins)
		}
		if payWins == 1 {
			wantOrderStatus(t, orders, e.ReservationID, seckill.OrderPaid, "")
			wantStock(t, sales, s.ID, unsold, version)
			wantNoRequest(t, rs, e.ReservationID)
		} else {
			wantOrderStatus(t, orders, e.ReservationID, seckill.OrderCancelled, "buyer")
			wantStock(t, sales, s.ID, unsold+1, version+1)
			if r, err := rs.RestoreRequest(ctx, e.ReservationID); err != nil || r.State != seckill.RestoreStateRedisPending {
				t.Errorf("round %d: request after a restore won = %+v, %v; want redis_pending", round, r, err)
			}
		}
		for i := range errs {
			// The losers saw the winner: after a payment every restore
			// conflicts; after a restore every payment does, and every
			// other restore is unchanged.
			if payWins == 1 && i%2 == 1 && errs[i] == nil {
				t.Errorf("round %d: restore %d succeeded after the payment won", round, i)
			}
			if restoreWins == 1 && i%2 == 0 && errs[i] == nil {
				t.Errorf("round %d: payment %d succeeded after the restore won", round, i)
			}
		}
	}
}

// testRestorePaid: a paid order is not restored, and nothing is written.
func testRestorePaid(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	e := persistOne(t, orders, s, now)
	if _, err := orders.PayOrder(ctx, e.ReservationID, now); err != nil {
		t.Fatal(err)
	}
	unsold, version := saleStock(t, sales, s.ID)
	o, changed, err := rs.RestoreOrder(ctx, e.ReservationID, "operator", now)
	wantCode(t, "RestoreOrder of a paid order", err, seckill.ESTATECONFLICT)
	if changed {
		t.Errorf("RestoreOrder of a paid order = %+v, changed", o)
	}
	wantOrderStatus(t, orders, e.ReservationID, seckill.OrderPaid, "")
	wantStock(t, sales, s.ID, unsold, version)
	wantNoRequest(t, rs, e.ReservationID)
}

// testRestoreCancelled: an order cancelled already is not restored again;
// only its missing request is recorded, as redis_pending, once.
func testRestoreCancelled(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	e := persistOne(t, orders, s, now)
	if _, _, err := orders.CancelOrder(ctx, e.ReservationID, "buyer", now); err != nil {
		t.Fatal(err)
	}
	unsold, version := saleStock(t, sales, s.ID)
	at := now.Add(time.Minute)
	o, changed, err := rs.RestoreOrder(ctx, e.ReservationID, "pay timeout", at)
	if err != nil || changed {
		t.Fatalf("RestoreOrder of a cancelled order = %v, %v; want unchanged, nil", changed, err)
	}
	if o == nil || o.Status != seckill.OrderCancelled || o.CancelReason != "buyer" {
		t.Errorf("RestoreOrder of a cancelled order returned %+v, want it unchanged", o)
	}
	wantStock(t, sales, s.ID, unsold, version)
	req := seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: "pay timeout",
		State: seckill.RestoreStateRedisPending, CreatedAt: at, UpdatedAt: at}
	wantRequest(t, rs, req)
	if _, changed, err := rs.RestoreOrder(ctx, e.ReservationID, "again", at.Add(time.Minute)); err != nil || changed {
		t.Fatalf("second RestoreOrder = %v, %v; want unchanged, nil", changed, err)
	}
	wantStock(t, sales, s.ID, unsold, version)
	wantRequest(t, rs, req)
}

// testRestoreFailedOrder: a reservation that ended in failed_orders took
// no stock from the database: its restore records the request only, once,
// even when restores race.
func testRestoreFailedOrder(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 1, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1, 1)
	out := persist(t, orders, s.ID, evs, now)
	if out[1] != seckill.PersistRejected {
		t.Fatalf("second event of a sale of 1: outcome %d, want PersistRejected", out[1])
	}
	unsold, version := saleStock(t, sales, s.ID)
	at := now.Add(time.Minute)
	o, changed, err := rs.RestoreOrder(ctx, evs[1].ReservationID, "refund", at)
	if err != nil || !changed || o != nil {
		t.Fatalf("RestoreOrder of a failed order = %+v, %v, %v; want nil, changed, nil", o, changed, err)
	}
	wantStock(t, sales, s.ID, unsold, version)
	req := seckill.RestoreRequest{ReservationID: evs[1].ReservationID, SaleID: s.ID, Reason: "refund",
		State: seckill.RestoreStateRedisPending, CreatedAt: at, UpdatedAt: at}
	wantRequest(t, rs, req)
	if o, changed, err := rs.RestoreOrder(ctx, evs[1].ReservationID, "again", at.Add(time.Minute)); err != nil || changed || o != nil {
		t.Errorf("second RestoreOrder of a failed order = %+v, %v, %v; want nil, unchanged, nil", o, changed, err)
	}
	wantRequest(t, rs, req)

	// A dead letter, restored by ten callers at once: one records it.
	dead := orderEvents(s.ID, now, 1)[0]
	if err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: dead.ReservationID, SaleID: s.ID,
		UserID: dead.UserID, Qty: 1, Reason: "gave up", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	unsold, version = saleStock(t, sales, s.ID)
	const n = 10
	var (
		changes = make([]bool, n)
		errs    = make([]error, n)
	)
	atOnce(n, func(i int) {
		_, changes[i], errs[i] = rs.RestoreOrder(ctx, dead.ReservationID, "refund", at)
	})
	wins := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("RestoreOrder %d of a dead letter: %v", i, errs[i])
		} else if changes[i] {
			wins++
		}
	}
	if wins != 1 {
		t.Errorf("%d concurrent restores of a dead letter changed something, want exactly 1", wins)
	}
	wantStock(t, sales, s.ID, unsold, version)
	wantRequest(t, rs, seckill.RestoreRequest{ReservationID: dead.ReservationID, SaleID: s.ID, Reason: "refund",
		State: seckill.RestoreStateRedisPending, CreatedAt: at, UpdatedAt: at})
}

// testRestoreNotFound: a reservation with neither an order nor a failed
// order is ErrNotFound, and nothing is written, not even when a parked
// request exists for it.
func testRestoreNotFound(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	persistOne(t, orders, s, now) // a sale with orders still has none of these
	unsold, version := saleStock(t, sales, s.ID)
	for _, id := range []string{
		seckill.NewReservationID(s.ID, now),
		seckill.NewReservationID(servicetest.UniqueName("missing_"), now),
		"",
		"not a reservation",
		"x'; DROP TABLE orders; --",
		s.ID + ".茶",
	} {
		if o, changed, err := rs.RestoreOrder(ctx, id, "operator", now); !errors.Is(err, seckill.ErrNotFound) || changed || o != nil {
			t.Errorf("RestoreOrder(%q) = %+v, %v, %v; want nil, false, ErrNotFound", id, o, changed, err)
		}
		wantNoRequest(t, rs, id)
		if err := rs.UpdateRestore(ctx, id, seckill.RestoreStateDone, "", false, now); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("UpdateRestore(%q) = %v, want ErrNotFound", id, err)
		}
	}
	wantStock(t, sales, s.ID, unsold, version)

	parked := orderEvents(s.ID, now, 1)[0]
	if _, err := rs.ParkRestore(ctx, parked.ReservationID, s.ID, "early", now); err != nil {
		t.Fatal(err)
	}
	unsold, version = saleStock(t, sales, s.ID)
	if _, _, err := rs.RestoreOrder(ctx, parked.ReservationID, "operator", now.Add(time.Minute)); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("RestoreOrder of a parked reservation = %v, want ErrNotFound", err)
	}
	wantRequest(t, rs, seckill.RestoreRequest{ReservationID: parked.ReservationID, SaleID: s.ID, Reason: "early",
		State: seckill.RestoreStateParked, CreatedAt: now, UpdatedAt: now})
	wantStock(t, sales, s.ID, unsold, version)
}

// testParkThenPersist: a restore parked before its order lands makes the
// order land cancelled, taking no stock (even from a sold-out sale), and
// moves the request to redis_pending; the order can never be paid.
func testParkThenPersist(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 2, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1, 2, 1)
	parkedAt := now.Add(-time.Minute)
	reason := "buyer cancelled — 买家取消"
	r, err := rs.ParkRestore(ctx, evs[1].ReservationID, s.ID, reason, parkedAt)
	if err != nil {
		t.Fatalf("ParkRestore: %v", err)
	}
	req := seckill.RestoreRequest{ReservationID: evs[1].ReservationID, SaleID: s.ID, Reason: reason,
		State: seckill.RestoreStateParked, CreatedAt: parkedAt, UpdatedAt: parkedAt}
	checkRequest(t, r, req)
	wantRequest(t, rs, req)
	// Parked again: the first request, unchanged.
	r, err = rs.ParkRestore(ctx, evs[1].ReservationID, s.ID, "operator", parkedAt.Add(time.Second))
	if err != nil {
		t.Fatalf("second ParkRestore: %v", err)
	}
	checkRequest(t, r, req)
	if unsold, _ := saleStock(t, sales, s.ID); unsold != 2 {
		t.Errorf("after ParkRestore, Unsold = %d, want 2", unsold)
	}

	// A stock of 2 takes both orders of 1 only if the parked order of 2
	// takes nothing.
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistCreated))
	wantOrderStatus(t, orders, evs[0].ReservationID, seckill.OrderPlaced, "")
	wantOrderStatus(t, orders, evs[2].ReservationID, seckill.OrderPlaced, "")
	o := wantOrderStatus(t, orders, evs[1].ReservationID, seckill.OrderCancelled, reason)
	if o.Qty != 2 || o.AmountCents != 200 || o.UserID != evs[1].UserID || o.SaleID != s.ID {
		t.Errorf("cancelled order = %+v, want qty 2, amount 200, user %s", o, evs[1].UserID)
	}
	checkStoredTime(t, "cancelled order CreatedAt", o.CreatedAt, now)
	checkStoredTime(t, "cancelled order ReservedAt", o.ReservedAt, evs[1].ReservedAt)
	req.State, req.UpdatedAt = seckill.RestoreStateRedisPending, now
	wantRequest(t, rs, req)
	unsold, version := saleStock(t, sales, s.ID)
	if unsold != 0 {
		t.Errorf("after the batch, Unsold = %d, want 0", unsold)
	}
	_, err = orders.PayOrder(ctx, evs[1].ReservationID, now)
	wantCode(t, "PayOrder of an order whose restore was parked", err, seckill.ESTATECONFLICT)
	if _, changed, err := rs.RestoreOrder(ctx, evs[1].ReservationID, "operator", now); err != nil || changed {
		t.Errorf("RestoreOrder after the parked restore was applied = %v, %v; want unchanged, nil", changed, err)
	}
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistDuplicate))
	wantStock(t, sales, s.ID, 0, version)
	wantRequest(t, rs, req)

	// Parked on a sold-out sale: created (cancelled), not rejected.
	late := orderEvents(s.ID, now, 1)[0]
	if _, err := rs.ParkRestore(ctx, late.ReservationID, s.ID, "early", now); err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, persist(t, orders, s.ID, []seckill.ReservationEvent{late}, now), all(seckill.PersistCreated))
	wantOrderStatus(t, orders, late.ReservationID, seckill.OrderCancelled, "early")
	if _, err := orders.FailedOrder(ctx, late.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("FailedOrder of a parked reservation on a sold-out sale = %v, want ErrNotFound", err)
	}
	if unsold, _ := saleStock(t, sales, s.ID); unsold != 0 {
		t.Errorf("Unsold = %d, want 0", unsold)
	}

	// Ids that are not the sale's reservations are the caller's mistake;
	// a sale the database does not know is not found.
	for _, c := range []struct{ id, sale string }{
		{seckill.NewReservationID(s.ID, now), s.ID + "x"},
		{"not a reservation", s.ID},
		{s.ID + ".茶", s.ID},
	} {
		if r, err := rs.ParkRestore(ctx, c.id, c.sale, "x", now); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("ParkRestore(%q, %q) = %+v, %v; want EINVALID", c.id, c.sale, r, err)
		}
	}
	missing := servicetest.UniqueName("missing_")
	if r, err := rs.ParkRestore(ctx, seckill.NewReservationID(missing, now), missing, "x", now); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("ParkRestore on an unknown sale = %+v, %v; want ErrNotFound", r, err)
	}
}

// testParkAfterOrder: a restore parked just after its order landed (the
// caller's RestoreOrder found none a moment before) is applied at once,
// exactly as RestoreOrder would: the order can never stay payable with
// its restore parked.
func testParkAfterOrder(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()

	e := persistOne(t, orders, s, now)
	unsold, version := saleStock(t, sales, s.ID)
	r, err := rs.ParkRestore(ctx, e.ReservationID, s.ID, "late", now)
	if err != nil {
		t.Fatalf("ParkRestore of an ordered reservation: %v", err)
	}
	checkRequest(t, r, seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: "late",
		State: seckill.RestoreStateRedisPending, CreatedAt: now, UpdatedAt: now})
	wantOrderStatus(t, orders, e.ReservationID, seckill.OrderCancelled, "late")
	if got, gotVersion := saleStock(t, sales, s.ID); got != unsold+1 || gotVersion <= version {
		t.Errorf("after ParkRestore of an ordered reservation: Unsold %d, Version %d; want %d, above %d", got, gotVersion, unsold+1, version)
	}

	paid := persistOne(t, orders, s, now)
	if _, err := orders.PayOrder(ctx, paid.ReservationID, now); err != nil {
		t.Fatal(err)
	}
	unsold, _ = saleStock(t, sales, s.ID)
	_, err = rs.ParkRestore(ctx, paid.ReservationID, s.ID, "late", now)
	wantCode(t, "ParkRestore of a paid order", err, seckill.ESTATECONFLICT)
	wantNoRequest(t, rs, paid.ReservationID)
	if got, _ := saleStock(t, sales, s.ID); got != unsold {
		t.Errorf("after ParkRestore of a paid order, Unsold = %d, want %d", got, unsold)
	}

	dead := orderEvents(s.ID, now, 1)[0]
	if err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: dead.ReservationID, SaleID: s.ID, Qty: 1, Reason: "gave up", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	r, err = rs.ParkRestore(ctx, dead.ReservationID, s.ID, "refund", now)
	if err != nil {
		t.Fatalf("ParkRestore of a failed order: %v", err)
	}
	checkRequest(t, r, seckill.RestoreRequest{ReservationID: dead.ReservationID, SaleID: s.ID, Reason: "refund",
		State: seckill.RestoreStateRedisPending, CreatedAt: now, UpdatedAt: now})
}

// testParkRacesPersist: restores are parked while the writers persist the
// same reservations, in batches mixed with others. Whichever commits
// first, every parked reservation ends with its order cancelled, its
// request redis_pending and its stock untouched; the others are ordered.
func testParkRacesPersist(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	const (
		n       = 30 // parked and as many not
		writers = 4
		batch   = 5
	)
	for round := range 3 {
		s := orderSale(t, sales, 2*n, 100)
		now := time.Now()
		evs := orderEvents(s.ID, now, ones(2*n)...)
		parked := func(i int) bool { return i%2 == 1 }
		order := rand.Perm(len(evs))
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex
			errs  []error
		)
		fail := func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		for w := range writers {
			wg.Go(func() {
				<-start
				var mine []seckill.ReservationEvent
				for k, i := range order {
					if k%writers == w {
						mine = append(mine, evs[i])
					}
				}
				for from := 0; from < len(mine); from += batch {
					b := mine[from:min(from+batch, len(mine))]
					out, err := orders.PersistReservations(ctx, s.ID, b, now, orderPayTimeout)
					if err != nil {
						fail(fmt.Errorf("writer %d: %w", w, err))
						continue
					}
					for j, o := range out {
						if o != seckill.PersistCreated {
							fail(fmt.Errorf("writer %d: outcome %d for %s, want PersistCreated", w, o, b[j].ReservationID))
						}
					}
				}
			})
		}
		for i := range evs {
			if !parked(i) {
				continue
			}
			wg.Go(func() {
				<-start
				if _, err := rs.ParkRestore(ctx, evs[i].ReservationID, s.ID, "parked", now); err != nil {
					fail(fmt.Errorf("ParkRestore %d: %w", i, err))
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs[:min(len(errs), 5)] {
			t.Errorf("round %d: %v", round, err)
		}
		if len(errs) > 0 {
			t.FailNow()
		}
		for i, e := range evs {
			if !parked(i) {
				wantOrderStatus(t, orders, e.ReservationID, seckill.OrderPlaced, "")
				continue
			}
			wantOrderStatus(t, orders, e.ReservationID, seckill.OrderCancelled, "parked")
			if r, err := rs.RestoreRequest(ctx, e.ReservationID); err != nil || r.State != seckill.RestoreStateRedisPending {
				t.Errorf("round %d: request of parked reservation %d = %+v, %v; want redis_pending", round, i, r, err)
			}
		}
		if unsold, _ := saleStock(t, sales, s.ID); unsold != n {
			t.Errorf("round %d: Unsold = %d, want %d (only the %d reservations not parked take stock)", round, unsold, n, n)
		}
	}
}

// testUpdateRestore: attempts count up, the error is the last attempt's,
// AlertedAt is set once, and a request not found is ErrNotFound.
func testUpdateRestore(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	t0 := time.Now()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	e := persistOne(t, orders, s, t0)
	if _, _, err := rs.RestoreOrder(ctx, e.ReservationID, "timeout", t0); err != nil {
		t.Fatal(err)
	}
	req := seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: "timeout",
		State: seckill.RestoreStateRedisPending, CreatedAt: t0, UpdatedAt: t0}
	steps := []struct {
		state   seckill.RestoreState
		lastErr string
		alerted bool
		// want: attempts, alerted at (minute, or -1 for not)
		attempts, alertedAt int
	}{
		{seckill.RestoreStateRedisPending, "redis: connection refused", false, 1, -1},
		{seckill.RestoreStateRedisPending, "redis: i/o timeout — 超时", true, 2, 2},
		{seckill.RestoreStateRedisPending, "redis: i/o timeout", true, 3, 2},
		{seckill.RestoreStateDone, "", false, 4, 2},
		{seckill.RestoreStateDone, "", true, 5, 2},
	}
	for i, st := range steps {
		m := i + 1
		if err := rs.UpdateRestore(ctx, e.ReservationID, st.state, st.lastErr, st.alerted, at(m)); err != nil {
			t.Fatalf("UpdateRestore step %d: %v", m, err)
		}
		req.State, req.LastError, req.Attempts, req.UpdatedAt = st.state, st.lastErr, st.attempts, at(m)
		req.AlertedAt = time.Time{}
		if st.alertedAt >= 0 {
			req.AlertedAt = at(st.alertedAt)
		}
		wantRequest(t, rs, req)
	}

	// A parked request: attempts and the alert on it, still parked.
	p := orderEvents(s.ID, t0, 1)[0]
	if _, err := rs.ParkRestore(ctx, p.ReservationID, s.ID, "early", t0); err != nil {
		t.Fatal(err)
	}
	if err := rs.UpdateRestore(ctx, p.ReservationID, seckill.RestoreStateParked, "no order after 1h", true, at(60)); err != nil {
		t.Fatalf("UpdateRestore of a parked request: %v", err)
	}
	wantRequest(t, rs, seckill.RestoreRequest{ReservationID: p.ReservationID, SaleID: s.ID, Reason: "early",
		State: seckill.RestoreStateParked, Attempts: 1, LastError: "no order after 1h",
		AlertedAt: at(60), CreatedAt: t0, UpdatedAt: at(60)})

	err := rs.UpdateRestore(ctx, p.ReservationID, "bogus", "", false, at(61))
	wantCode(t, "UpdateRestore to an unknown state", err, seckill.EINVALID)
	err = rs.UpdateRestore(ctx, seckill.NewReservationID(s.ID, t0), seckill.RestoreStateDone, "", false, at(61))
	if !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("UpdateRestore of no request = %v, want ErrNotFound", err)
	}
}

// testRestoreRequests: requests of one state, oldest first, up to the
// limit. They are dated in 2001, so that they are the oldest in a store
// that other subtests share.
func testRestoreRequests(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, _, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	base := time.Date(2001, 9, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(1000)) * time.Hour)
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = seckill.NewReservationID(s.ID, base)
	}
	// Parked at base + i minutes, in a scrambled order.
	for _, i := range []int{3, 0, 4, 1, 2} {
		if _, err := rs.ParkRestore(ctx, ids[i], s.ID, fmt.Sprintf("r%d", i), base.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.UpdateRestore(ctx, ids[2], seckill.RestoreStateDone, "", false, base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	list := func(state seckill.RestoreState, limit int) []string {
		t.Helper()
		got, err := rs.RestoreRequests(ctx, state, limit)
		if err != nil {
			t.Fatalf("RestoreRequests(%s, %d): %v", state, limit, err)
		}
		if len(got) > limit {
			t.Errorf("RestoreRequests(%s, %d) returned %d", state, limit, len(got))
		}
		var ours []string
		for i, r := range got {
			if r.State != state {
				t.Errorf("RestoreRequests(%s) listed %s in state %s", state, r.ReservationID, r.State)
			}
			if i > 0 && r.CreatedAt.Before(got[i-1].CreatedAt) {
				t.Errorf("RestoreRequests(%s) is not oldest first: %v after %v", state, r.CreatedAt, got[i-1].CreatedAt)
			}
			if r.SaleID == s.ID {
				ours = append(ours, r.Reason)
			}
		}
		return ours
	}
	if got, want := fmt.Sprint(list(seckill.RestoreStateParked, 2)), "[r0 r1]"; got != want {
		t.Errorf("RestoreRequests(parked, 2): ours %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(list(seckill.RestoreStateParked, 10_000)), "[r0 r1 r3 r4]"; got != want {
		t.Errorf("RestoreRequests(parked): ours %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(list(seckill.RestoreStateDone, 10_000)), "[r2]"; got != want {
		t.Errorf("RestoreRequests(done): ours %s, want %s", got, want)
	}
	got, err := rs.RestoreRequests(ctx, seckill.RestoreStateParked, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("RestoreRequests(parked, 1) = %v, %v", got, err)
	}
	checkRequest(t, got[0], seckill.RestoreRequest{ReservationID: ids[0], SaleID: s.ID, Reason: "r0",
		State: seckill.RestoreStateParked, CreatedAt: base, UpdatedAt: base})

	_, err = rs.RestoreRequests(ctx, seckill.RestoreStateParked, 0)
	wantCode(t, "RestoreRequests(limit 0)", err, seckill.EINVALID)
	_, err = rs.RestoreRequests(ctx, "bogus", 10)
	wantCode(t, "RestoreRequests(unknown state)", err, seckill.EINVALID)
}

// testSaleLedger: a sale's ledger holds the sale and exactly its orders,
// failed orders and restore requests, and its numbers add up.
func testSaleLedger(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, ledgers := newStores(t)
	s := orderSale(t, sales, 5, 100)
	other := orderSale(t, sales, 5, 100)
	now := time.Now()

	empty, err := ledgers.SaleLedger(ctx, s.ID)
	if err != nil {
		t.Fatalf("SaleLedger of a new sale: %v", err)
	}
	if empty.Sale == nil || empty.Sale.ID != s.ID || empty.Sale.Unsold != 5 ||
		len(empty.Orders)+len(empty.Failed)+len(empty.Restores) != 0 {
		t.Errorf("SaleLedger of a new sale = %+v, want the sale alone", empty)
	}

	evs := orderEvents(s.ID, now, 1, 1, 1, 1, 3)
	out := persist(t, orders, s.ID, evs, now)
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome {
		return []seckill.PersistOutcome{seckill.PersistCreated, seckill.PersistCreated, seckill.PersistCreated,
			seckill.PersistCreated, seckill.PersistRejected}[i]
	})
	persistOne(t, orders, other, now) // not in s's ledger
	if _, err := orders.PayOrder(ctx, evs[0].ReservationID, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.RestoreOrder(ctx, evs[1].ReservationID, "operator", now); err != nil {
		t.Fatal(err)
	}
	parked := orderEvents(s.ID, now, 1)[0]
	if _, err := rs.ParkRestore(ctx, parked.ReservationID, s.ID, "early", now); err != nil {
		t.Fatal(err)
	}
	dead := orderEvents(s.ID, now, 2)[0]
	if err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: dead.ReservationID, SaleID: s.ID,
		UserID: dead.UserID, Qty: 2, Reason: "gave up", Attempts: 5, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}

	l, err := ledgers.SaleLedger(ctx, s.ID)
	if err != nil {
		t.Fatalf("SaleLedger: %v", err)
	}
	stored, err := sales.Sale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.Sale == nil || l.Sale.ID != s.ID || l.Sale.Stock != 5 || l.Sale.Unsold != stored.Unsold || l.Sale.Version != stored.Version {
		t.Errorf("ledger sale = %+v, want %+v", l.Sale, stored)
	}
	statuses := map[string]seckill.OrderStatus{}
	var sold int64
	for _, o := range l.Orders {
		if o.SaleID != s.ID {
			t.Errorf("ledger of %s holds an order of sale %s", s.ID, o.SaleID)
		}
		statuses[o.ReservationID] = o.Status
		if o.Status != seckill.OrderCancelled {
			sold += o.Qty
		}
	}
	wantStatuses := map[string]seckill.OrderStatus{
		evs[0].ReservationID: seckill.OrderPaid,
		evs[1].ReservationID: seckill.OrderCancelled,
		evs[2].ReservationID: seckill.OrderPlaced,
		evs[3].ReservationID: seckill.OrderPlaced,
	}
	if fmt.Sprint(statuses) != fmt.Sprint(wantStatuses) {
		t.Errorf("ledger orders %v, want %v", statuses, wantStatuses)
	}
	// Every unit put on sale is either unsold or in an order not cancelled.
	if l.Sale != nil && l.Sale.Unsold+sold != l.Sale.Stock {
		t.Errorf("ledger: Unsold %d + %d sold != Stock %d", l.Sale.Unsold, sold, l.Sale.Stock)
	}
	failed := map[string]int64{}
	for _, f := range l.Failed {
		failed[f.ReservationID] = f.Qty
	}
	if want := map[string]int64{evs[4].ReservationID: 3, dead.ReservationID: 2}; fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Errorf("ledger failed orders %v, want %v", failed, want)
	}
	restores := map[string]seckill.RestoreState{}
	for _, r := range l.Restores {
		restores[r.ReservationID] = r.State
	}
	if want := map[string]seckill.RestoreState{
		evs[1].ReservationID: seckill.RestoreStateRedisPending,
		parked.ReservationID: seckill.RestoreStateParked,
	}; fmt.Sprint(restores) != fmt.Sprint(want) {
		t.Errorf("ledger restores %v, want %v", restores, want)
	}

	for _, id := range []string{servicetest.UniqueName("missing_"), "not a sale", ""} {
		if l, err := ledgers.SaleLedger(ctx, id); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("SaleLedger(%q) = %+v, %v; want ErrNotFound", id, l, err)
		}
	}
}

// testLedgerPages: a sale's ledger read a page at a time (keyset pages by
// reservation id, the rows of a list of reservations, the totals) is the
// ledger SaleLedger reads whole; an archive record is kept and replaced.
func testLedgerPages(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, ledgers := newStores(t)
	pages, ok := ledgers.(reconcile.LedgerPages)
	if !ok {
		t.Skip("the ledger store does not read pages")
	}
	s := orderSale(t, sales, 20, 100)
	other := orderSale(t, sales, 5, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1, 1, 1, 1, 1, 1, 1, 2, 30)
	persist(t, orders, s.ID, evs, now)
	otherEv := persistOne(t, orders, other, now) // not in s's pages
	if _, err := orders.PayOrder(ctx, evs[0].ReservationID, now); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[1:3] {
		if _, _, err := rs.RestoreOrder(ctx, e.ReservationID, "operator", now); err != nil {
			t.Fatal(err)
		}
	}
	parked := orderEvents(s.ID, now, 1)[0]
	if _, err := rs.ParkRestore(ctx, parked.ReservationID, s.ID, "early", now); err != nil {
		t.Fatal(err)
	}
	lost := orderEvents(s.ID, now, 1)[0]
	if err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: lost.ReservationID, SaleID: s.ID,
		UserID: lost.UserID, Qty: 1, Reason: seckill.ReasonLostInStockStore + ": forgotten", Attempts: 1, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	whole, err := ledgers.SaleLedger(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	byID := func(ids []string) []string { slices.Sort(ids); return ids }
	var wantOrders, wantFailed, wantRestores []string
	for _, o := range whole.Orders {
		wantOrders = append(wantOrders, o.ReservationID+":"+string(o.Status))
	}
	for _, f := range whole.Failed {
		wantFailed = append(wantFailed, f.ReservationID)
	}
	for _, q := range whole.Restores {
		wantRestores = append(wantRestores, q.ReservationID+":"+string(q.State))
	}
	byID(wantOrders)
	byID(wantFailed)
	byID(wantRestores)
	for _, size := range []int{1, 3, 100} {
		var gotOrders, gotFailed, gotRestores []string
		for after := ""; ; {
			page, err := pages.OrdersAfter(ctx, s.ID, after, size)
			if err != nil {
				t.Fatalf("OrdersAfter: %v", err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > size {
				t.Fatalf("OrdersAfter(limit %d) = %d rows", size, len(page))
			}
			for _, o := range page {
				gotOrders = append(gotOrders, o.ReservationID+":"+string(o.Status))
			}
			after = page[len(page)-1].ReservationID
		}
		for after := ""; ; {
			page, err := pages.FailedOrdersAfter(ctx, s.ID, after, size)
			if err != nil {
				t.Fatalf("FailedOrdersAfter: %v", err)
			}
			if len(page) == 0 {
				break
			}
			for _, f := range page {
				gotFailed = append(gotFailed, f.ReservationID)
			}
			after = page[len(page)-1].ReservationID
		}
		for after := ""; ; {
			page, err := pages.RestoresAfter(ctx, s.ID, after, size)
			if err != nil {
				t.Fatalf("RestoresAfter: %v", err)
			}
			if len(page) == 0 {
				break
			}
			for _, q := range page {
				gotRestores = append(gotRestores, q.ReservationID+":"+string(q.State))
			}
			after = page[len(page)-1].ReservationID
		}
		// In order: each page follows the last, by reservation id.
		if !slices.Equal(gotOrders, wantOrders) || !slices.Equal(gotFailed, wantFailed) || !slices.Equal(gotRestores, wantRestores) {
			t.Errorf("pages of %d: orders %v, failed %v, restores %v; want %v, %v, %v", size, gotOrders, gotFailed, gotRestores, wantOrders, wantFailed, wantRestores)
		}
	}

	some := []string{evs[0].ReservationID, evs[8].ReservationID, parked.ReservationID, otherEv.ReservationID, servicetest.UniqueName("missing_")}
	l, err := pages.LedgerOf(ctx, s.ID, some, seckill.LedgerAll)
	if err != nil {
		t.Fatalf("LedgerOf: %v", err)
	}
	if len(l.Orders) != 1 || l.Orders[0].ReservationID != evs[0].ReservationID || l.Orders[0].Status != seckill.OrderPaid ||
		len(l.Failed) != 1 || l.Failed[0].ReservationID != evs[8].ReservationID ||
		len(l.Restores) != 1 || l.Restores[0].ReservationID != parked.ReservationID {
		t.Errorf("LedgerOf(%v) = %d orders, %d failed, %d restores; want %s paid, %s failed, %s parked (nothing of the other sale)",
			some, len(l.Orders), len(l.Failed), len(l.Restores), evs[0].ReservationID, evs[8].ReservationID, parked.ReservationID)
	}

	if l, err := pages.LedgerOf(ctx, s.ID, some, seckill.LedgerOrders); err != nil || len(l.Orders) != 1 || len(l.Failed)+len(l.Restores) != 0 {
		t.Errorf("LedgerOf(orders only) = %+v, %v; want the one order alone", l, err)
	}

	tot, err := pages.LedgerTotals(ctx, s.ID)
	if err != nil {
		t.Fatalf("LedgerTotals: %v", err)
	}
	want := seckill.LedgerTotals{
		Sale:    tot.Sale,
		Paid:    seckill.LedgerCount{Count: 1, Units: 1},
		Ordered: seckill.LedgerCount{Count: 5, Units: 6}, Cancelled: seckill.LedgerCount{Count: 2, Units: 2},
		Failed: seckill.LedgerCount{Count: 2, Units: 31}, LostClaims: seckill.LedgerCount{Count: 1, Units: 1},
		Parked: 1, RedisPending: 2,
	}
	if !reflect.DeepEqual(*tot, want) {
		t.Errorf("LedgerTotals = %+v; want %+v", *tot, want)
	}
	if tot.Sale == nil || tot.Sale.Stock != 20 || tot.Sale.Unsold != 20-7 {
		t.Errorf("LedgerTotals sale = %+v; want stock 20, unsold 13", tot.Sale)
	}

	type archiver interface {
		RecordArchive(ctx context.Context, saleID string, claims int64, at time.Time) error
	}
	if a, ok := ledgers.(archiver); ok {
		at := now.Truncate(time.Millisecond)
		for _, claims := range []int64{11, 12} {
			if err := a.RecordArchive(ctx, s.ID, claims, at); err != nil {
				t.Fatalf("RecordArchive: %v", err)
			}
		}
		tot, err := pages.LedgerTotals(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tot.Archive == nil || tot.Archive.Claims != 12 || !tot.Archive.ArchivedAt.Equal(at) {
			t.Errorf("archive after two records = %+v; want the last, 12 claims at %v", tot.Archive, at)
		}
	}
	if _, err := pages.LedgerTotals(ctx, servicetest.UniqueName("missing_")); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("LedgerTotals of an unknown sale: %v; want ErrNotFound", err)
	}
}
