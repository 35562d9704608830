package restore

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill-dev/seckill"
)

// placeOrders places n orders of sale tea, each with its reservation
// active in the stock store, and returns their reservation ids.
func placeOrders(store *fakeStore, stock *fakeStock, c *clock, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = seckill.NewReservationID("tea", c.t)
		store.orders[ids[i]], stock.active[ids[i]] = seckill.OrderPlaced, true
	}
	return ids
}

// TestRestoreAll: a batch answers each reservation as Restore would, with
// one database call, one Redis call and one announcement for the batch.
func TestRestoreAll(t *testing.T) {
	svc, store, stock, c, _ := setup(t)
	ids := placeOrders(store, stock, c, 3)
	paid := seckill.NewReservationID("tea", c.t)
	store.orders[paid], stock.active[paid] = seckill.OrderPaid, true
	noOrder := seckill.NewReservationID("tea", c.t)
	ids = append(ids, paid, noOrder, ids[0])

	out := svc.RestoreAll(context.Background(), "tea", ids, "payment timeout")
	want := []seckill.RestoreResult{seckill.Restored, seckill.Restored, seckill.Restored, "", seckill.RestoreParked, seckill.AlreadyRestored}
	for i, o := range out {
		if o.Result != want[i] {
			t.Errorf("reservation %d: %+v; want %s", i, o, want[i])
		}
	}
	if seckill.ErrorCode(out[3].Err) != seckill.ESTATECONFLICT {
		t.Errorf("paid order: %v; want ESTATECONFLICT", out[3].Err)
	}
	if store.batches != 1 || stock.batches != 1 || len(stock.published) != 1 || stock.restores != 3 {
		t.Errorf("%d database batches, %d Redis batches, %d announcements, %d units back; want 1, 1, 1, 3",
			store.batches, stock.batches, len(stock.published), stock.restores)
	}
	for _, id := range ids[:3] {
		if r := store.request(id); r.State != seckill.RestoreStateDone {
			t.Errorf("request of %s is %s; want done", id, r.State)
		}
	}
	if r := store.request(noOrder); r.State != seckill.RestoreStateParked {
		t.Errorf("request without an order is %s; want parked", r.State)
	}
}

// TestCancelOrders: each order is answered as a canceller answers it:
// nil once restored, the caller's alreadyDone for one restored before,
// the conflict for a paid one.
func TestCancelOrders(t *testing.T) {
	svc, store, stock, c, _ := setup(t)
	ids := placeOrders(store, stock, c, 2)
	paid := seckill.NewReservationID("tea", c.t)
	store.orders[paid], stock.active[paid] = seckill.OrderPaid, true
	ids = append(ids, paid, ids[0])
	orders := make([]*seckill.Order, len(ids))
	for i, id := range ids {
		orders[i] = &seckill.Order{ReservationID: id, SaleID: "tea"}
	}
	already := errors.New("already cancelled")
	errs := svc.CancelOrders(context.Background(), orders, "payment timeout", already)
	if len(errs) != 4 || errs[0] != nil || errs[1] != nil || errs[3] != already {
		t.Fatalf("errs = %v; want nil, nil, a conflict, already", errs)
	}
	if seckill.ErrorCode(errs[2]) != seckill.ESTATECONFLICT {
		t.Errorf("paid order: %v; want ESTATECONFLICT", errs[2])
	}
}

// TestRestoreAllRedisDown: with Redis down the database step stands, the
// requests stay redis_pending with the attempt recorded, and the retry
// loop finishes them in one batch once Redis is back.
func TestRestoreAllRedisDown(t *testing.T) {
	svc, store, stock, c, _ := setup(t)
	ids := placeOrders(store, stock, c, 4)
	stock.down = true
	for i, o := range svc.RestoreAll(context.Background(), "tea", ids, "payment timeout") {
		if o.Result != seckill.Restored || o.Err != nil {
			t.Errorf("reservation %d with Redis down: %+v; want restored (the database step decides)", i, o)
		}
	}
	for _, id := range ids {
		if r := store.request(id); r.State != seckill.RestoreStateRedisPending || r.Attempts != 1 || r.LastError == "" {
			t.Errorf("request %+v; want redis_pending after 1 attempt, with its error", r)
		}
	}
	if len(stock.published) != 0 || store.stock != 4 {
		t.Fatalf("announced %v, database stock %d; want nothing announced, 4 units back in the database", stock.published, store.stock)
	}
	stock.down = false
	batches := stock.batches
	if err := svc.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if stock.batches != batches+1 || stock.restores != 4 || len(stock.published) != 1 {
		t.Errorf("retry: %d Redis batches, %d units back, %d announcements; want 1, 4, 1", stock.batches-batches, stock.restores, len(stock.published))
	}
	for _, id := range ids {
		if r := store.request(id); r.State != seckill.RestoreStateDone {
			t.Errorf("request %+v after the retry; want done", r)
		}
	}
}
