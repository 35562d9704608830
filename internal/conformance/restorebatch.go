package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/restore"
)

// batchCase builds, in a fresh sale, one reservation of each kind a batch
// restore meets, and returns the ids to restore in order: orders still
// ordered, a paid one, one cancelled by its buyer, a failed order, a
// failed order restored before, an id with nothing, an id of another
// sale, and one order listed twice.
func batchCase(t *testing.T, sales seckill.SaleStore, orders seckill.OrderStore, rs restore.Store, now time.Time) (*seckill.Sale, []string) {
	t.Helper()
	ctx := t.Context()
	s := orderSale(t, sales, 8, 100)
	evs := orderEvents(s.ID, now, 1, 2, 1, 1, 1, 1, 5, 5)
	out := persist(t, orders, s.ID, evs, now)
	if out[6] != seckill.PersistRejected || out[7] != seckill.PersistRejected {
		t.Fatalf("persist outcomes %v; want the last two rejected (a sale of 8)", out)
	}
	if _, err := orders.PayOrder(ctx, evs[3].ReservationID, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := orders.CancelOrder(ctx, evs[4].ReservationID, "buyer", now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.RestoreOrder(ctx, evs[7].ReservationID, "earlier", now); err != nil {
		t.Fatal(err)
	}
	other := orderSale(t, sales, 1, 100)
	return s, []string{
		evs[0].ReservationID, evs[1].ReservationID, evs[2].ReservationID, // ordered
		evs[3].ReservationID,                    // paid
		evs[4].ReservationID,                    // cancelled
		evs[6].ReservationID,                    // failed
		evs[7].ReservationID,                    // failed, restored before
		seckill.NewReservationID(s.ID, now),     // nothing
		seckill.NewReservationID(other.ID, now), // another sale
		evs[0].ReservationID,                    // twice
		evs[5].ReservationID,                    // ordered
	}
}

// testRestoreOrdersMatchesOneByOne: RestoreOrders answers every
// reservation of a mixed batch as RestoreOrder called on each in turn
// answers its twin in another sale, and leaves the same stock, orders and
// requests behind, with one version bump for the whole batch.
func testRestoreOrdersMatchesOneByOne(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	now := time.Now()
	at := now.Add(time.Minute)
	batchSale, batchIDs := batchCase(t, sales, orders, rs, now)
	oneSale, oneIDs := batchCase(t, sales, orders, rs, now)
	_, batchVersion := saleStock(t, sales, batchSale.ID)

	got, err := rs.RestoreOrders(ctx, batchSale.ID, batchIDs, "payment timeout", at)
	if err != nil {
		t.Fatalf("RestoreOrders: %v", err)
	}
	if len(got) != len(batchIDs) {
		t.Fatalf("RestoreOrders answered %d of %d", len(got), len(batchIDs))
	}
	for i, id := range oneIDs {
		o, changed, err := rs.RestoreOrder(ctx, id, "payment timeout", at)
		g := got[i]
		if g.Changed != changed || seckill.ErrorCode(g.Err) != seckill.ErrorCode(err) ||
			errors.Is(g.Err, seckill.ErrNotFound) != errors.Is(err, seckill.ErrNotFound) || (g.Order == nil) != (o == nil) {
			t.Errorf("reservation %d: batch answered %+v; one by one {%v %v %v}", i, g, o, changed, err)
			continue
		}
		if o != nil && (g.Order.Status != o.Status || g.Order.CancelReason != o.CancelReason || g.Order.Qty != o.Qty) {
			t.Errorf("reservation %d: batch order %+v; one by one %+v", i, *g.Order, *o)
		}
	}
	batchUnsold, v := saleStock(t, sales, batchSale.ID)
	oneUnsold, _ := saleStock(t, sales, oneSale.ID)
	// The paid unit stays sold, and so does the buyer's cancel: CancelOrder
	// alone gives nothing back, and a restore of a cancelled order neither.
	if batchUnsold != oneUnsold || batchUnsold != 8-2 {
		t.Errorf("Unsold after batch %d, one by one %d; want 6", batchUnsold, oneUnsold)
	}
	if v != batchVersion+1 {
		t.Errorf("sale version went from %d to %d; want one bump for the batch", batchVersion, v)
	}
	for i := range batchIDs {
		if i == 8 { // of another sale: the twins differ
			continue
		}
		a, errA := rs.RestoreRequest(ctx, batchIDs[i])
		b, errB := rs.RestoreRequest(ctx, oneIDs[i])
		if (errA == nil) != (errB == nil) {
			t.Errorf("reservation %d: batch request %+v, %v; one by one %+v, %v", i, a, errA, b, errB)
		} else if a != nil && (a.State != b.State || a.Reason != b.Reason || a.Attempts != b.Attempts) {
			t.Errorf("reservation %d: batch request %+v; one by one %+v", i, *a, *b)
		}
		oa, errA := orders.Order(ctx, batchIDs[i])
		ob, errB := orders.Order(ctx, oneIDs[i])
		if (errA == nil) != (errB == nil) || (oa != nil && (oa.Status != ob.Status || oa.CancelReason != ob.CancelReason)) {
			t.Errorf("reservation %d: batch order %+v, %v; one by one %+v, %v", i, oa, errA, ob, errB)
		}
	}

	// Again: nothing changes any more.
	again, err := rs.RestoreOrders(ctx, batchSale.ID, batchIDs, "again", at.Add(time.Minute))
	if err != nil {
		t.Fatalf("second RestoreOrders: %v", err)
	}
	for i, r := range again {
		if r.Changed {
			t.Errorf("second RestoreOrders changed reservation %d: %+v", i, r)
		}
	}
	wantStock(t, sales, batchSale.ID, 6, v)

	if _, err := rs.RestoreOrders(ctx, "nosuchsale", batchIDs, "x", at); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("RestoreOrders of an unknown sale: %v; want ErrNotFound", err)
	}
}

// testRestoreOrdersLargeBatch: a batch larger than any statement's chunk
// restores every order once.
func testRestoreOrdersLargeBatch(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	const n = 1234
	s := orderSale(t, sales, n, 100)
	now := time.Now()
	qtys := make([]int64, n)
	for i := range qtys {
		qtys[i] = 1
	}
	evs := orderEvents(s.ID, now, qtys...)
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistCreated))
	ids := make([]string, n)
	for i, e := range evs {
		ids[i] = e.ReservationID
	}
	got, err := rs.RestoreOrders(ctx, s.ID, ids, "payment timeout", now)
	if err != nil {
		t.Fatalf("RestoreOrders: %v", err)
	}
	for i, r := range got {
		if !r.Changed || r.Err != nil {
			t.Fatalf("reservation %d: %+v; want changed", i, r)
		}
	}
	if unsold, _ := saleStock(t, sales, s.ID); unsold != n {
		t.Errorf("Unsold = %d; want %d", unsold, n)
	}
	pending, err := rs.RestoreRequests(ctx, seckill.RestoreStateRedisPending, 2*n)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, r := range pending {
		if r.SaleID == s.ID {
			mine++
		}
	}
	if mine != n {
		t.Errorf("%d requests redis_pending; want %d", mine, n)
	}
	if err := rs.FinishRestores(ctx, ids, "", now.Add(time.Second)); err != nil {
		t.Fatalf("FinishRestores: %v", err)
	}
	for _, i := range []int{0, 499, 500, n - 1} {
		wantRequest(t, rs, seckill.RestoreRequest{ReservationID: ids[i], SaleID: s.ID, Reason: "payment timeout",
			State: seckill.RestoreStateDone, Attempts: 1, CreatedAt: now, UpdatedAt: now.Add(time.Second)})
	}
}

// testFinishRestores: FinishRestores is UpdateRestore(done) for each id:
// attempts + 1, the error recorded, unknown ids skipped.
func testFinishRestores(t *testing.T, newStores restoreStores) {
	ctx := t.Context()
	sales, orders, rs, _ := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	a, b := persistOne(t, orders, s, now), persistOne(t, orders, s, now)
	for _, e := range []seckill.ReservationEvent{a, b} {
		if _, _, err := rs.RestoreOrder(ctx, e.ReservationID, "r", now); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.UpdateRestore(ctx, b.ReservationID, seckill.RestoreStateRedisPending, "redis down", false, now); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Minute)
	ids := []string{a.ReservationID, b.ReservationID, seckill.NewReservationID(s.ID, now), "not-an-id"}
	if err := rs.FinishRestores(ctx, ids, "no record", at); err != nil {
		t.Fatalf("FinishRestores: %v", err)
	}
	for i, e := range []seckill.ReservationEvent{a, b} {
		wantRequest(t, rs, seckill.RestoreRequest{ReservationID: e.ReservationID, SaleID: s.ID, Reason: "r",
			State: seckill.RestoreStateDone, Attempts: i + 1, LastError: "no record", CreatedAt: now, UpdatedAt: at})
	}
	if err := rs.FinishRestores(ctx, nil, "", at); err != nil {
		t.Errorf("FinishRestores of nothing: %v", err)
	}
}
