package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// orderPayTimeout is the pay timeout every test persists with.
const orderPayTimeout = 15 * time.Minute

// OrderStore runs the conformance suite of seckill.OrderStore against the
// stores newStores returns: a sale store, to create the sales that orders
// take stock from, and the order store of the same database. newStores is
// called once per subtest and returns stores ready for use (migrated); it
// may return fresh stores each time or share them: every subtest uses sale
// and reservation ids of its own and ignores rows it did not create.
//
// The suite sees the database's unsold stock only through the order store:
// a sale has none left when a new event for it is rejected.
func OrderStore(t *testing.T, newStores func(t *testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	t.Run("PersistBatch", func(t *testing.T) { testPersistBatch(t, newStores) })
	t.Run("PersistLargeBatch", func(t *testing.T) { testPersistLargeBatch(t, newStores) })
	t.Run("StockShort", func(t *testing.T) { testPersistStockShort(t, newStores) })
	t.Run("OverLimit", func(t *testing.T) { testPersistOverLimit(t, newStores) })
	t.Run("OverLimitCompetingWriters", func(t *testing.T) { testPersistOverLimitCompeting(t, newStores) })
	t.Run("DuplicatesInBatch", func(t *testing.T) { testPersistDuplicatesInBatch(t, newStores) })
	t.Run("BadEventsInBatch", func(t *testing.T) { testPersistBadEventsInBatch(t, newStores) })
	t.Run("OverLimitInsideLargeBatch", func(t *testing.T) { testPersistOverLimitInsideLargeBatch(t, newStores) })
	t.Run("CompetingBatchesOverLimit", func(t *testing.T) { testPersistCompetingBatchesOverLimit(t, newStores) })
	t.Run("FailedOrderIsDuplicate", func(t *testing.T) { testPersistFailedOrderIsDuplicate(t, newStores) })
	t.Run("OrderBlocksFailedOrder", func(t *testing.T) { testOrderBlocksFailedOrder(t, newStores) })
	t.Run("UnknownSale", func(t *testing.T) { testPersistUnknownSale(t, newStores) })
	t.Run("CompetingWriters", func(t *testing.T) { testPersistCompetingWriters(t, newStores, 300, 300) })
	t.Run("CompetingWritersOversubscribed", func(t *testing.T) { testPersistCompetingWriters(t, newStores, 200, 300) })
	t.Run("PayAndCancel", func(t *testing.T) { testPayAndCancel(t, newStores) })
	t.Run("PayAfterDeadline", func(t *testing.T) { testPayAfterDeadline(t, newStores) })
	t.Run("PayCancelRace", func(t *testing.T) { testPayCancelRace(t, newStores) })
	t.Run("NotFound", func(t *testing.T) { testOrderNotFound(t, newStores) })
	t.Run("ExpiredOrders", func(t *testing.T) { testExpiredOrders(t, newStores) })
	t.Run("FailedOrderPages", func(t *testing.T) { testFailedOrderPages(t, newStores) })
	t.Run("FailedOrderBadQueries", func(t *testing.T) { testFailedOrderBadQueries(t, newStores) })
	t.Run("FailedOrderCounts", func(t *testing.T) { testFailedOrderCounts(t, newStores) })
	// Last: it wants its failed orders the newest of all.
	t.Run("FailedOrders", func(t *testing.T) { testFailedOrders(t, newStores) })
}

// orderSale creates a sale of stock units at priceCents and returns it.
func orderSale(t *testing.T, sales seckill.SaleStore, stock, priceCents int64) *seckill.Sale {
	t.Helper()
	s := newSale()
	s.Stock, s.PriceCents, s.PurchaseLimit = stock, priceCents, 10
	if err := sales.CreateSale(t.Context(), s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return s
}

// limitSale creates a sale of stock units with a purchase limit of limit
// units per buyer and returns it.
func limitSale(t *testing.T, sales seckill.SaleStore, stock, limit int64) *seckill.Sale {
	t.Helper()
	s := newSale()
	s.Stock, s.PurchaseLimit = stock, limit
	if err := sales.CreateSale(t.Context(), s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return s
}

// orderEvents returns one event per qty, with fresh reservation ids of the
// sale, reserved at at (plus i milliseconds for event i).
func orderEvents(saleID string, at time.Time, qtys ...int64) []seckill.ReservationEvent {
	evs := make([]seckill.ReservationEvent, len(qtys))
	for i, q := range qtys {
		evs[i] = seckill.ReservationEvent{
			ReservationID: seckill.NewReservationID(saleID, at),
			SaleID:        saleID,
			UserID:        fmt.Sprintf("user-%d-茶", i),
			Qty:           q,
			ReservedAt:    at.Add(time.Duration(i) * time.Millisecond),
		}
	}
	return evs
}

// userEvents returns orderEvents all of one buyer.
func userEvents(saleID string, at time.Time, user string, qtys ...int64) []seckill.ReservationEvent {
	evs := orderEvents(saleID, at, qtys...)
	for i := range evs {
		evs[i].UserID = user
	}
	return evs
}

// ones returns n quantities of 1.
func ones(n int) []int64 {
	q := make([]int64, n)
	for i := range q {
		q[i] = 1
	}
	return q
}

// persist calls PersistReservations, failing the test on an error or on
// outcomes of the wrong length.
func persist(t *testing.T, orders seckill.OrderStore, saleID string, evs []seckill.ReservationEvent, now time.Time) []seckill.PersistOutcome {
	t.Helper()
	out, err := orders.PersistReservations(t.Context(), saleID, evs, now, orderPayTimeout)
	if err != nil {
		t.Fatalf("PersistReservations(%d events): %v", len(evs), err)
	}
	if len(out) != len(evs) {
		t.Fatalf("PersistReservations(%d events) returned %d outcomes", len(evs), len(out))
	}
	return out
}

// wantOutcomes checks every outcome, reporting at most a few mismatches.
func wantOutcomes(t *testing.T, got []seckill.PersistOutcome, want func(i int) seckill.PersistOutcome) {
	t.Helper()
	bad := 0
	for i, o := range got {
		if w := want(i); o != w {
			if bad++; bad <= 5 {
				t.Errorf("outcome of event %d = %d, want %d", i, o, w)
			}
		}
	}
	if bad > 5 {
		t.Errorf("… %d mismatched outcomes in all", bad)
	}
}

func all(o seckill.PersistOutcome) func(int) seckill.PersistOutcome {
	return func(int) seckill.PersistOutcome { return o }
}

// wantSoldOut checks that the database has no stock left for the sale: a
// new event is rejected, into failed_orders.
func wantSoldOut(t *testing.T, orders seckill.OrderStore, saleID string, now time.Time) {
	t.Helper()
	probe := orderEvents(saleID, now, 1)
	out := persist(t, orders, saleID, probe, now)
	if out[0] != seckill.PersistRejected {
		t.Errorf("a new event after the stock ran out: outcome %d, want PersistRejected", out[0])
	}
	if _, err := orders.Order(t.Context(), probe[0].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("Order of a rejected event = %v, want ErrNotFound", err)
	}
}

// checkOrder checks an order persisted from e at now against sale s.
func checkOrder(t *testing.T, got *seckill.Order, e seckill.ReservationEvent, s *seckill.Sale, now time.Time) {
	t.Helper()
	want := seckill.Order{
		ID:            seckill.OrderIDOf(e.ReservationID),
		ReservationID: e.ReservationID,
		SaleID:        s.ID,
		UserID:        e.UserID,
		Qty:           e.Qty,
		AmountCents:   e.Qty * s.PriceCents,
		Status:        seckill.OrderPlaced,
	}
	if got.ID != want.ID || got.ReservationID != want.ReservationID || got.SaleID != want.SaleID ||
		got.UserID != want.UserID || got.Qty != want.Qty || got.AmountCents != want.AmountCents ||
		got.Status != want.Status || got.CancelReason != "" {
		t.Errorf("order = %+v, want %+v", *got, want)
	}
	checkStoredTime(t, "PayBy", got.PayBy, now.Add(orderPayTimeout))
	checkStoredTime(t, "ReservedAt", got.ReservedAt, e.ReservedAt)
	checkStoredTime(t, "CreatedAt", got.CreatedAt, now)
	checkStoredTime(t, "UpdatedAt", got.UpdatedAt, now)
}

// testPersistBatch: a batch that exactly sells out a sale becomes one
// order per event, takes the stock with one version bump, and the same
// batch again (a redelivery) creates nothing.
func testPersistBatch(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 200, 1999)
	now := time.Now()
	evs := orderEvents(s.ID, now.Add(-time.Second), ones(200)...)

	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistCreated))
	for _, e := range evs {
		o, err := orders.Order(ctx, e.ReservationID)
		if err != nil {
			t.Fatalf("Order(%s): %v", e.ReservationID, err)
		}
		checkOrder(t, o, e, s, now)
	}
	got, err := sales.Sale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 {
		t.Errorf("after one batch, sale version = %d, want 2", got.Version)
	}
	if got.Stock != 200 {
		t.Errorf("after one batch, sale Stock (units put on sale) = %d, want 200", got.Stock)
	}

	// The redelivery: all duplicates, nothing rewritten.
	later := now.Add(time.Minute)
	wantOutcomes(t, persist(t, orders, s.ID, evs, later), all(seckill.PersistDuplicate))
	for _, e := range evs[:5] {
		o, err := orders.Order(ctx, e.ReservationID)
		if err != nil {
			t.Fatalf("Order(%s): %v", e.ReservationID, err)
		}
		checkOrder(t, o, e, s, now)
		if _, err := orders.FailedOrder(ctx, e.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("FailedOrder of a duplicate = %v, want ErrNotFound", err)
		}
	}
	wantSoldOut(t, orders, s.ID, later)

	// An empty batch is no work.
	if out, err := orders.PersistReservations(ctx, s.ID, nil, now, orderPayTimeout); err != nil || len(out) != 0 {
		t.Errorf("PersistReservations(no events) = %v, %v; want no outcomes, nil", out, err)
	}
}

// testPersistLargeBatch: batches of 1000 events, beyond what one statement
// may bind on some databases, half of them over the stock.
func testPersistLargeBatch(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 1500, 100)
	now := time.Now()
	first := orderEvents(s.ID, now, ones(1000)...)
	wantOutcomes(t, persist(t, orders, s.ID, first, now), all(seckill.PersistCreated))

	// 500 left: 500 created, 500 rejected; the first batch's events mixed
	// in are duplicates.
	second := orderEvents(s.ID, now, ones(1000)...)
	mixed := append(append([]seckill.ReservationEvent{}, second...), first[:300]...)
	out := persist(t, orders, s.ID, mixed, now)
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome {
		switch {
		case i < 500:
			return seckill.PersistCreated
		case i < 1000:
			return seckill.PersistRejected
		}
		return seckill.PersistDuplicate
	})
	for _, i := range []int{0, 499} {
		if _, err := orders.Order(ctx, second[i].ReservationID); err != nil {
			t.Errorf("Order of created event %d: %v", i, err)
		}
	}
	for _, i := range []int{500, 999} {
		f, err := orders.FailedOrder(ctx, second[i].ReservationID)
		if err != nil {
			t.Errorf("FailedOrder of rejected event %d: %v", i, err)
		} else if f.SaleID != s.ID || f.Qty != 1 {
			t.Errorf("failed order of event %d = %+v, want sale %s qty 1", i, f, s.ID)
		}
	}
	wantOutcomes(t, persist(t, orders, s.ID, mixed, now), all(seckill.PersistDuplicate))
	wantSoldOut(t, orders, s.ID, now)
}

// testPersistStockShort: when the database has less stock than the
// events want, events are accepted in order while they fit, and the rest
// go to failed_orders; the stock never goes negative.
func testPersistStockShort(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 5, 250)
	now := time.Now()
	evs := orderEvents(s.ID, now, 2, 2, 2, 1)
	out := persist(t, orders, s.ID, evs, now)
	want := []seckill.PersistOutcome{seckill.PersistCreated, seckill.PersistCreated, seckill.PersistRejected, seckill.PersistCreated}
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome { return want[i] })

	for _, i := range []int{0, 1, 3} {
		o, err := orders.Order(ctx, evs[i].ReservationID)
		if err != nil {
			t.Fatalf("Order of event %d: %v", i, err)
		}
		checkOrder(t, o, evs[i], s, now)
	}
	if _, err := orders.Order(ctx, evs[2].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("Order of the rejected event = %v, want ErrNotFound", err)
	}
	f, err := orders.FailedOrder(ctx, evs[2].ReservationID)
	if err != nil {
		t.Fatalf("FailedOrder of the rejected event: %v", err)
	}
	if f.ReservationID != evs[2].ReservationID || f.SaleID != s.ID || f.UserID != evs[2].UserID || f.Qty != 2 {
		t.Errorf("failed order = %+v, want reservation %s, sale %s, user %s, qty 2",
			f, evs[2].ReservationID, s.ID, evs[2].UserID)
	}
	if !strings.Contains(f.Reason, "stock") {
		t.Errorf("failed order reason = %q, want it to say the stock was short", f.Reason)
	}
	checkStoredTime(t, "failed order CreatedAt", f.CreatedAt, now)
	// The payload is the event, so an operator can re-drive it.
	var ev seckill.ReservationEvent
	if err := json.Unmarshal(f.Payload, &ev); err != nil || ev.ReservationID != evs[2].ReservationID || ev.Qty != 2 {
		t.Errorf("failed order payload %q decodes to %+v, %v; want the event", f.Payload, ev, err)
	}

	if _, version := saleStock(t, sales, s.ID); version != 2 {
		t.Errorf("sale version = %d, want 2", version)
	}
	wantSoldOut(t, orders, s.ID, now)
	// A redelivery of the batch: all duplicates, the rejected one included.
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistDuplicate))
}

// testPersistOverLimit: the database refuses an order that would take its
// buyer past the sale's per-user limit, counting every order of the sale
// the buyer holds (earlier batches and earlier events of the same batch,
// not cancelled ones), into failed_orders with a reason of its own, and
// takes no stock for it.
func testPersistOverLimit(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := limitSale(t, sales, 10, 2)
	now := time.Now()
	first := userEvents(s.ID, now, "alice", 1)
	wantOutcomes(t, persist(t, orders, s.ID, first, now), all(seckill.PersistCreated))

	// alice holds 1 of 2: one more fits, the next does not; bob's 2 fit,
	// his third unit does not; carol's 3 at once do not.
	batch := append(userEvents(s.ID, now, "alice", 1, 1), userEvents(s.ID, now, "bob", 2, 1)...)
	batch = append(batch, userEvents(s.ID, now, "carol", 3)...)
	out := persist(t, orders, s.ID, batch, now)
	want := []seckill.PersistOutcome{seckill.PersistCreated, seckill.PersistOverLimit,
		seckill.PersistCreated, seckill.PersistOverLimit, seckill.PersistOverLimit}
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome { return want[i] })
	for _, i := range []int{1, 3, 4} {
		f, err := orders.FailedOrder(ctx, batch[i].ReservationID)
		if err != nil {
			t.Fatalf("FailedOrder of over-limit event %d: %v", i, err)
		}
		if !strings.HasPrefix(f.Reason, seckill.ReasonOverLimit) || f.UserID != batch[i].UserID || f.Qty != batch[i].Qty {
			t.Errorf("failed order of event %d = %+v, want reason %q…, user %s, qty %d",
				i, f, seckill.ReasonOverLimit, batch[i].UserID, batch[i].Qty)
		}
		if _, err := orders.Order(ctx, batch[i].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Order of over-limit event %d = %v, want ErrNotFound", i, err)
		}
	}
	// A redelivery is all duplicates, the refused ones included.
	wantOutcomes(t, persist(t, orders, s.ID, batch, now), all(seckill.PersistDuplicate))

	// 4 of 10 units are taken: 6 buyers of 1 sell the sale out, so the
	// refused events took no stock.
	rest := orderEvents(s.ID, now, ones(6)...)
	wantOutcomes(t, persist(t, orders, s.ID, rest, now), all(seckill.PersistCreated))
	wantSoldOut(t, orders, s.ID, now)

	// A cancelled order frees its unit of the limit (its stock is
	// restored by the restore path, outside this store's PersistReservations).
	if _, _, err := orders.CancelOrder(ctx, first[0].ReservationID, "test", now); err != nil {
		t.Fatalf("CancelOrder: %v", err)
	}
	s2 := limitSale(t, sales, 10, 2)
	// alice's orders of another sale do not count toward this one.
	other := userEvents(s2.ID, now, "alice", 2)
	wantOutcomes(t, persist(t, orders, s2.ID, other, now), all(seckill.PersistCreated))
}

// testPersistOverLimitCompeting: writers racing on the same buyers (one
// reservation delivered to two writers is the broker's at-least-once; two
// reservations of one buyer are what a Redis that forgot the buyer hands
// out) never take a buyer past the limit.
func testPersistOverLimitCompeting(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := limitSale(t, sales, 1000, 1)
	now := time.Now()
	const writers, buyers = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	evsOf := make([][]seckill.ReservationEvent, writers)
	for w := range writers {
		evsOf[w] = orderEvents(s.ID, now, ones(buyers)...) // user-0 … user-29, a fresh reservation each
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range evsOf[w] {
				if _, err := orders.PersistReservations(ctx, s.ID, []seckill.ReservationEvent{e}, now, orderPayTimeout); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("PersistReservations: %v", err)
	}
	wantOneOrderEach(t, orders, evsOf, buyers)
}

// testPersistBadEventsInBatch: invalid events inside a large batch are
// refused one by one, into failed_orders; every other event of the batch
// becomes an order, and only those take stock.
func testPersistBadEventsInBatch(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 300, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, ones(300)...)
	bad := map[int]string{7: "bad user id", 150: "qty 0 out of range", 299: "qty out of range"}
	evs[7].UserID = ""
	evs[150].Qty = 0
	evs[299].Qty = seckill.MaxPurchaseLimit + 1
	out := persist(t, orders, s.ID, evs, now)
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome {
		if _, ok := bad[i]; ok {
			return seckill.PersistRejected
		}
		return seckill.PersistCreated
	})
	for i, why := range bad {
		f, err := orders.FailedOrder(ctx, evs[i].ReservationID)
		if err != nil {
			t.Errorf("FailedOrder of the event with a %s: %v", why, err)
		} else if !strings.Contains(f.Reason, "invalid reservation event") {
			t.Errorf("failed order of the event with a %s: reason %q, want it to say the event is invalid", why, f.Reason)
		}
	}
	// 297 of 300 units went: three more buyers sell the sale out.
	wantOutcomes(t, persist(t, orders, s.ID, orderEvents(s.ID, now, 1, 1, 1), now), all(seckill.PersistCreated))
	wantSoldOut(t, orders, s.ID, now)
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistDuplicate))
}

// testPersistOverLimitInsideLargeBatch: in a batch of more buyers than one
// statement asks about, every buyer's limit counts what they held before
// the batch and what the batch gave them before, wherever in the batch
// their events are.
func testPersistOverLimitInsideLargeBatch(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := limitSale(t, sales, 5000, 2)
	now := time.Now()
	as := func(user string, qtys ...int64) []seckill.ReservationEvent {
		return userEvents(s.ID, now, user, qtys...)
	}
	// carol holds the limit already, dave one unit of it.
	wantOutcomes(t, persist(t, orders, s.ID, append(as("carol", 2), as("dave", 1)...), now), all(seckill.PersistCreated))

	// 1200 one-unit buyers, and among them: alice three times (the third
	// is over), bob twice two units (the second is over), carol once (over:
	// she is past the first 500 buyers of the batch), dave once (fits) and
	// once more (over).
	batch := orderEvents(s.ID, now, ones(1200)...)
	over := map[int]bool{}
	put := func(i int, e seckill.ReservationEvent, isOver bool) {
		batch[i] = e
		over[i] = isOver
	}
	alice, bob := as("alice", 1, 1, 1), as("bob", 2, 2)
	put(3, alice[0], false)
	put(640, alice[1], false)
	put(1190, alice[2], true)
	put(499, bob[0], false)
	put(500, bob[1], true)
	put(1100, as("carol", 1)[0], true)
	dave := as("dave", 1, 1)
	put(900, dave[0], false)
	put(901, dave[1], true)
	out := persist(t, orders, s.ID, batch, now)
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome {
		if over[i] {
			return seckill.PersistOverLimit
		}
		return seckill.PersistCreated
	})
	for i, isOver := range over {
		if !isOver {
			continue
		}
		if f, err := orders.FailedOrder(ctx, batch[i].ReservationID); err != nil || !strings.HasPrefix(f.Reason, seckill.ReasonOverLimit) {
			t.Errorf("event %d of %s: failed order %+v, %v; want one over the limit", i, batch[i].UserID, f, err)
		}
	}
	// The stock taken is the batch's orders: 3 units before, then 1200
	// events less the 4 refused, bob's order of 2 counting twice.
	if unsold, _ := saleStock(t, sales, s.ID); unsold != s.Stock-3-(1200-4+1) {
		t.Errorf("unsold %d after the batch, want %d", unsold, s.Stock-3-(1200-4+1))
	}
}

// testPersistCompetingBatchesOverLimit: writers racing with large batches
// of the same buyers (each a fresh reservation: a Redis that forgot its
// buyers) take nobody past the limit, however their transactions
// interleave.
func testPersistCompetingBatchesOverLimit(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := limitSale(t, sales, 1000, 1)
	now := time.Now()
	const writers, buyers = 4, 120
	var (
		errs  = make(chan error, writers)
		evsOf = make([][]seckill.ReservationEvent, writers)
	)
	for w := range writers {
		evsOf[w] = orderEvents(s.ID, now, ones(buyers)...) // user-0 … user-119, in an order of its own
		rand.Shuffle(buyers, func(a, b int) { evsOf[w][a], evsOf[w][b] = evsOf[w][b], evsOf[w][a] })
	}
	atOnce(writers, func(w int) {
		for from := 0; from < buyers; from += 40 {
			if _, err := orders.PersistReservations(ctx, s.ID, evsOf[w][from:from+40], now, orderPayTimeout); err != nil {
				errs <- err
				return
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("PersistReservations: %v", err)
	}
	wantOneOrderEach(t, orders, evsOf, buyers)
	if unsold, _ := saleStock(t, sales, s.ID); unsold != s.Stock-buyers {
		t.Errorf("unsold %d, want %d: the stock taken is not the orders made", unsold, s.Stock-buyers)
	}
}

// testPersistDuplicatesInBatch: a reservation repeated within one batch
// becomes one order and takes its stock once.
func testPersistDuplicatesInBatch(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	sales, orders := newStores(t)
	s := orderSale(t, sales, 3, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1, 1, 1)
	batch := []seckill.ReservationEvent{evs[0], evs[0], evs[1], evs[0], evs[2], evs[1]}
	out := persist(t, orders, s.ID, batch, now)
	want := []seckill.PersistOutcome{seckill.PersistCreated, seckill.PersistDuplicate, seckill.PersistCreated,
		seckill.PersistDuplicate, seckill.PersistCreated, seckill.PersistDuplicate}
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome { return want[i] })
	wantSoldOut(t, orders, s.ID, now)
}

// testPersistFailedOrderIsDuplicate: a reservation that already has a
// failed order (a dead letter recorded earlier) is a duplicate, not an
// order: one reservation never ends as both.
func testPersistFailedOrderIsDuplicate(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 2, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1, 1)
	if err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{
		ReservationID: evs[0].ReservationID, SaleID: s.ID, UserID: evs[0].UserID, Qty: 1,
		Reason: "gave up after retries", Attempts: 5, CreatedAt: now,
	}); err != nil {
		t.Fatalf("RecordFailedOrder: %v", err)
	}
	out := persist(t, orders, s.ID, evs, now)
	wantOutcomes(t, out, func(i int) seckill.PersistOutcome {
		return []seckill.PersistOutcome{seckill.PersistDuplicate, seckill.PersistCreated}[i]
	})
	if _, err := orders.Order(ctx, evs[0].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("Order of a reservation with a failed order = %v, want ErrNotFound", err)
	}
	// The duplicate took no stock: one unit is left.
	wantOutcomes(t, persist(t, orders, s.ID, orderEvents(s.ID, now, 1), now), all(seckill.PersistCreated))
}

// testOrderBlocksFailedOrder: a dead letter of a reservation that already
// became an order (another copy of the message got through) is not
// recorded, and a race of the two ends with exactly one of them.
func testOrderBlocksFailedOrder(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 50, 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, 1)
	wantOutcomes(t, persist(t, orders, s.ID, evs, now), all(seckill.PersistCreated))
	err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: evs[0].ReservationID, SaleID: s.ID, Reason: "late dead letter", Attempts: 5})
	if !errors.Is(err, seckill.ErrDuplicate) {
		t.Fatalf("RecordFailedOrder of an ordered reservation = %v, want ErrDuplicate", err)
	}
	if _, err := orders.FailedOrder(ctx, evs[0].ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Fatalf("an ordered reservation also has a failed order (%v)", err)
	}

	// Race: each of 20 reservations is persisted and dead-lettered at once.
	race := orderEvents(s.ID, now, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	var wg sync.WaitGroup
	for _, ev := range race {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := orders.PersistReservations(ctx, s.ID, []seckill.ReservationEvent{ev}, now, orderPayTimeout); err != nil {
				t.Errorf("PersistReservations: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			err := orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: ev.ReservationID, SaleID: s.ID, Reason: "race", Attempts: 5})
			if err != nil && !errors.Is(err, seckill.ErrDuplicate) {
				t.Errorf("RecordFailedOrder: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, ev := range race {
		_, oerr := orders.Order(ctx, ev.ReservationID)
		_, ferr := orders.FailedOrder(ctx, ev.ReservationID)
		if (oerr == nil) == (ferr == nil) {
			t.Errorf("reservation %s: order err %v, failed order err %v; want exactly one of them", ev.ReservationID, oerr, ferr)
		}
	}
}

func testPersistUnknownSale(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	_, orders := newStores(t)
	saleID := servicetest.UniqueName("missing_")
	evs := orderEvents(saleID, time.Now(), 1, 1)
	out, err := orders.PersistReservations(ctx, saleID, evs, time.Now(), orderPayTimeout)
	if !errors.Is(err, seckill.ErrNotFound) {
		t.Fatalf("PersistReservations(unknown sale) = %v, %v; want ErrNotFound", out, err)
	}
	for _, e := range evs {
		if _, err := orders.Order(ctx, e.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Order after a failed persist = %v, want ErrNotFound", err)
		}
		if _, err := orders.FailedOrder(ctx, e.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("FailedOrder after a failed persist = %v, want ErrNotFound", err)
		}
	}
}

// testPersistCompetingWriters: eight writers persist overlapping batches
// of one sale at once, n events of qty 1 for a stock of stock units, every
// event delivered to two writers (as competing consumers see
// redeliveries). Each event is decided exactly once (one order, or one
// failed order when the stock is oversubscribed) and is a duplicate the
// other time; exactly min(stock, n) orders are created, and no caller sees
// an error: lost optimistic locks are retried inside the store.
func testPersistCompetingWriters(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore), stock, n int) {
	ctx := t.Context()
	sales, orders := newStores(t)
	const (
		writers   = 8
		batchSize = 25
	)
	s := orderSale(t, sales, int64(stock), 100)
	now := time.Now()
	evs := orderEvents(s.ID, now, ones(n)...)

	// Event i goes to writers i%8 and (i+3)%8, each in its own order.
	work := make([][]int, writers)
	for i := range evs {
		work[i%writers] = append(work[i%writers], i)
		work[(i+3)%writers] = append(work[(i+3)%writers], i)
	}
	for w := range writers {
		rand.Shuffle(len(work[w]), func(a, b int) { work[w][a], work[w][b] = work[w][b], work[w][a] })
	}
	var (
		mu       sync.Mutex
		outcomes = make([][]seckill.PersistOutcome, len(evs))
		errs     []error
	)
	atOnce(writers, func(w int) {
		for from := 0; from < len(work[w]); from += batchSize {
			idx := work[w][from:min(from+batchSize, len(work[w]))]
			batch := make([]seckill.ReservationEvent, len(idx))
			for j, i := range idx {
				batch[j] = evs[i]
			}
			out, err := orders.PersistReservations(ctx, s.ID, batch, now, orderPayTimeout)
			mu.Lock()
			if err != nil {
				errs = append(errs, fmt.Errorf("writer %d: %w", w, err))
			} else {
				for j, i := range idx {
					outcomes[i] = append(outcomes[i], out[j])
				}
			}
			mu.Unlock()
		}
	})
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("PersistReservations: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	created := 0
	for i, got := range outcomes {
		// Duplicate last: the other outcome is the decision.
		sort.Slice(got, func(a, b int) bool { return got[b] == seckill.PersistDuplicate && got[a] != seckill.PersistDuplicate })
		if len(got) != 2 || got[0] == seckill.PersistDuplicate || got[1] != seckill.PersistDuplicate {
			t.Errorf("event %d: outcomes %v, want one PersistCreated or PersistRejected, and one PersistDuplicate", i, got)
			continue
		}
		e := evs[i]
		o, oerr := orders.Order(ctx, e.ReservationID)
		_, ferr := orders.FailedOrder(ctx, e.ReservationID)
		if got[0] == seckill.PersistCreated {
			created++
			if oerr != nil || !errors.Is(ferr, seckill.ErrNotFound) {
				t.Errorf("created event %d: Order: %v, FailedOrder: %v; want an order only", i, oerr, ferr)
			} else {
				checkOrder(t, o, e, s, now)
			}
		} else if ferr != nil || !errors.Is(oerr, seckill.ErrNotFound) {
			t.Errorf("rejected event %d: Order: %v, FailedOrder: %v; want a failed order only", i, oerr, ferr)
		}
	}
	if want := min(stock, n); created != want {
		t.Errorf("%d orders created for a stock of %d, want %d", created, stock, want)
	}
	wantSoldOut(t, orders, s.ID, now)
}

// persistOne persists one event of qty 1 for sale s at now and returns it.
func persistOne(t *testing.T, orders seckill.OrderStore, s *seckill.Sale, now time.Time) seckill.ReservationEvent {
	t.Helper()
	e := orderEvents(s.ID, now, 1)
	wantOutcomes(t, persist(t, orders, s.ID, e, now), all(seckill.PersistCreated))
	return e[0]
}

// wantCode checks that err carries code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := seckill.ErrorCode(err); got != code {
		t.Errorf("%s = %v (code %q), want code %q", what, err, got, code)
	}
}

func testPayAndCancel(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()

	// Pay: the order is paid, UpdatedAt moves, nothing else does.
	paid := persistOne(t, orders, s, now)
	payAt := now.Add(time.Minute)
	o, err := orders.PayOrder(ctx, paid.ReservationID, payAt)
	if err != nil {
		t.Fatalf("PayOrder: %v", err)
	}
	if o.Status != seckill.OrderPaid || o.ReservationID != paid.ReservationID || o.Qty != 1 {
		t.Errorf("PayOrder = %+v, want the order, paid", *o)
	}
	checkStoredTime(t, "UpdatedAt after pay", o.UpdatedAt, payAt)
	checkStoredTime(t, "CreatedAt after pay", o.CreatedAt, now)
	if stored, err := orders.Order(ctx, paid.ReservationID); err != nil || stored.Status != seckill.OrderPaid {
		t.Errorf("Order after PayOrder = %+v, %v; want status paid", stored, err)
	}
	_, err = orders.PayOrder(ctx, paid.ReservationID, payAt)
	wantCode(t, "PayOrder of a paid order", err, seckill.ESTATECONFLICT)
	_, _, err = orders.CancelOrder(ctx, paid.ReservationID, "buyer", payAt)
	wantCode(t, "CancelOrder of a paid order", err, seckill.ESTATECONFLICT)

	// Cancel: cancelled with its reason; a second cancel changes nothing.
	cancelled := persistOne(t, orders, s, now)
	cancelAt := now.Add(2 * time.Minute)
	reason := "buyer changed their mind — 改变主意"
	o, changed, err := orders.CancelOrder(ctx, cancelled.ReservationID, reason, cancelAt)
	if err != nil || !changed {
		t.Fatalf("CancelOrder = %v, %v; want changed", changed, err)
	}
	if o.Status != seckill.OrderCancelled || o.CancelReason != reason {
		t.Errorf("CancelOrder = {Status: %s, CancelReason: %q}, want {cancelled, %q}", o.Status, o.CancelReason, reason)
	}
	checkStoredTime(t, "UpdatedAt after cancel", o.UpdatedAt, cancelAt)
	o, changed, err = orders.CancelOrder(ctx, cancelled.ReservationID, "timeout", cancelAt.Add(time.Minute))
	if err != nil || changed {
		t.Fatalf("second CancelOrder = %v, %v; want unchanged, nil", changed, err)
	}
	if o.Status != seckill.OrderCancelled || o.CancelReason != reason {
		t.Errorf("second CancelOrder = {Status: %s, CancelReason: %q}, want the first {cancelled, %q}", o.Status, o.CancelReason, reason)
	}
	checkStoredTime(t, "UpdatedAt after a second cancel", o.UpdatedAt, cancelAt)
	_, err = orders.PayOrder(ctx, cancelled.ReservationID, cancelAt)
	wantCode(t, "PayOrder of a cancelled order", err, seckill.ESTATECONFLICT)

	// An expired order may still be cancelled (that is what the timeout does).
	expired := persistOne(t, orders, s, now)
	if _, changed, err := orders.CancelOrder(ctx, expired.ReservationID, "pay timeout", now.Add(orderPayTimeout+time.Hour)); err != nil || !changed {
		t.Errorf("CancelOrder of an expired order = %v, %v; want changed", changed, err)
	}
}

// testPayAfterDeadline: PayBy is the last instant that is too late.
func testPayAfterDeadline(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	e := persistOne(t, orders, s, now)
	o, err := orders.Order(ctx, e.ReservationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, late := range []time.Time{o.PayBy, o.PayBy.Add(999 * time.Microsecond), o.PayBy.Add(time.Hour)} {
		_, err := orders.PayOrder(ctx, e.ReservationID, late)
		wantCode(t, fmt.Sprintf("PayOrder at PayBy%+v", late.Sub(o.PayBy)), err, seckill.ESTATECONFLICT)
	}
	if got, err := orders.Order(ctx, e.ReservationID); err != nil || got.Status != seckill.OrderPlaced {
		t.Errorf("after late payments, Order = %+v, %v; want still ordered", got, err)
	}
	if _, err := orders.PayOrder(ctx, e.ReservationID, o.PayBy.Add(-time.Millisecond)); err != nil {
		t.Errorf("PayOrder 1ms before PayBy: %v", err)
	}
}

// testPayCancelRace: payments and cancels of one order race; exactly one
// call wins, and every other sees the winner's state.
func testPayCancelRace(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 10, 100)
	now := time.Now()
	for round := range 3 {
		e := persistOne(t, orders, s, now)
		race := payRace(t, round, orders, e.ReservationID, now.Add(time.Second), func(at time.Time) (bool, error) {
			_, changed, err := orders.CancelOrder(ctx, e.ReservationID, "buyer", at)
			return changed, err
		})
		payWins, cancelWins, paid, changed := race.payWins, race.otherWins, race.errs, race.changed
		o, err := orders.Order(ctx, e.ReservationID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case payWins+cancelWins != 1:
			t.Errorf("round %d: %d payments and %d cancels won, want exactly one winner", round, payWins, cancelWins)
		case payWins == 1 && o.Status != seckill.OrderPaid:
			t.Errorf("round %d: a payment won but the order is %s", round, o.Status)
		case cancelWins == 1 && o.Status != seckill.OrderCancelled:
			t.Errorf("round %d: a cancel won but the order is %s", round, o.Status)
		}
		for i := range paid {
			// The losers saw the winner: after a payment every cancel
			// conflicts; after a cancel every other cancel is unchanged.
			if i%2 == 1 && !changed[i] && (paid[i] == nil) != (o.Status == seckill.OrderCancelled) {
				t.Errorf("round %d: losing cancel %d returned %v with the order %s", round, i, paid[i], o.Status)
			}
		}
	}
}

// payRaceResult is what payRace saw: per call (even calls pay, odd
// calls are the other kind) its error and whether it changed the order,
// and how many of each kind won.
type payRaceResult struct {
	errs               []error
	changed            []bool
	payWins, otherWins int
}

// payRace races 25 payments of one order, at at, against 25 calls of
// other (a cancel or a restore), all at once. A payment wins when it
// succeeds, another call when it changes the order; an error other than
// ESTATECONFLICT fails the test.
func payRace(t *testing.T, round int, orders seckill.OrderStore, reservationID string, at time.Time, other func(at time.Time) (changed bool, err error)) payRaceResult {
	t.Helper()
	const n = 50
	r := payRaceResult{errs: make([]error, n), changed: make([]bool, n)}
	atOnce(n, func(i int) {
		if i%2 == 0 {
			_, r.errs[i] = orders.PayOrder(t.Context(), reservationID, at)
		} else {
			r.changed[i], r.errs[i] = other(at)
		}
	})
	for i, err := range r.errs {
		switch {
		case i%2 == 0 && err == nil:
			r.payWins++
		case i%2 == 1 && err == nil && r.changed[i]:
			r.otherWins++
		case err != nil && seckill.ErrorCode(err) != seckill.ESTATECONFLICT:
			t.Errorf("round %d, call %d: %v, want nil or ESTATECONFLICT", round, i, err)
		}
	}
	return r
}

func testOrderNotFound(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 10, 100)
	persistOne(t, orders, s, time.Now()) // a store with orders still finds none of these
	for _, id := range []string{
		seckill.NewReservationID(s.ID, time.Now()),
		seckill.NewReservationID(servicetest.UniqueName("missing_"), time.Now()),
		"",
		"not a reservation",
		"x'; DROP TABLE orders; --",
		s.ID + ".茶",
	} {
		if got, err := orders.Order(ctx, id); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Order(%q) = %v, %v; want ErrNotFound", id, got, err)
		}
		if got, err := orders.PayOrder(ctx, id, time.Now()); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("PayOrder(%q) = %v, %v; want ErrNotFound", id, got, err)
		}
		if got, _, err := orders.CancelOrder(ctx, id, "x", time.Now()); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("CancelOrder(%q) = %v, %v; want ErrNotFound", id, got, err)
		}
		if got, err := orders.FailedOrder(ctx, id); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("FailedOrder(%q) = %v, %v; want ErrNotFound", id, got, err)
		}
	}
}

// testExpiredOrders: exactly the orders still ordered whose PayBy is at or
// before now. The orders are placed in 2001, so that other subtests'
// orders, placed now, are never expired at the times asked about.
func testExpiredOrders(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	sales, orders := newStores(t)
	s := orderSale(t, sales, 100, 100)
	base := time.Date(2001, 9, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(1000)) * time.Hour)
	at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }
	// Persisted at at(m), so due at at(m) + 15m.
	type order struct {
		placed int
		then   string // "", "pay", "cancel"
	}
	cases := map[string]order{
		"due_long_ago":   {placed: 0},
		"due_just_now":   {placed: 45}, // PayBy == the asked time
		"due_later":      {placed: 46},
		"due_far_later":  {placed: 600},
		"paid":           {placed: 1, then: "pay"},
		"cancelled":      {placed: 2, then: "cancel"},
		"due_long_ago_2": {placed: 3},
	}
	ask := at(60) // due_just_now: PayBy = at(45) + 15m = at(60)
	want := map[string]bool{"due_long_ago": true, "due_just_now": true, "due_long_ago_2": true}
	names := map[string]string{} // reservation id → case name
	for name, c := range cases {
		e := persistOne(t, orders, s, at(c.placed))
		names[e.ReservationID] = name
		switch c.then {
		case "pay":
			if _, err := orders.PayOrder(ctx, e.ReservationID, at(c.placed+1)); err != nil {
				t.Fatalf("PayOrder: %v", err)
			}
		case "cancel":
			if _, _, err := orders.CancelOrder(ctx, e.ReservationID, "buyer", at(c.placed+1)); err != nil {
				t.Fatalf("CancelOrder: %v", err)
			}
		}
	}
	list := func(now time.Time, limit int) map[string]bool {
		t.Helper()
		got, err := orders.ExpiredOrders(ctx, now, limit)
		if err != nil {
			t.Fatalf("ExpiredOrders: %v", err)
		}
		if len(got) > limit {
			t.Errorf("ExpiredOrders(limit %d) returned %d orders", limit, len(got))
		}
		ours := map[string]bool{}
		for _, o := range got {
			if o.Status != seckill.OrderPlaced || o.PayBy.After(now) {
				t.Errorf("ExpiredOrders(%v) listed %s, %s with PayBy %v", now, o.ReservationID, o.Status, o.PayBy)
			}
			if name, ok := names[o.ReservationID]; ok {
				if ours[name] {
					t.Errorf("ExpiredOrders listed %s twice", name)
				}
				ours[name] = true
			}
		}
		return ours
	}
	got := list(ask, 10_000)
	for name := range cases {
		if got[name] != want[name] {
			t.Errorf("ExpiredOrders at PayBy of due_just_now: %s listed = %v, want %v", name, got[name], want[name])
		}
	}
	// A moment earlier, due_just_now is not yet due.
	if got := list(ask.Add(-time.Millisecond), 10_000); got["due_just_now"] || !got["due_long_ago"] {
		t.Errorf("ExpiredOrders 1ms before due_just_now's PayBy = %v, want due_long_ago and not due_just_now", got)
	}
	list(ask, 2) // only checks the limit and what is listed
	if got := list(base.Add(-time.Hour), 10_000); len(got) != 0 {
		t.Errorf("ExpiredOrders before any PayBy = %v, want none of ours", got)
	}
}

// testFailedOrders: recording, reading back, deduplication and listing.
// The failed orders are dated in 2101, so that they are the newest in a
// store that other subtests share.
func testFailedOrders(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	ctx := t.Context()
	_, orders := newStores(t)
	base := time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(1_000_000)) * time.Hour)
	saleID := servicetest.UniqueName("fo_")
	resIDs := make([]string, 10)
	for i := range resIDs {
		resIDs[i] = seckill.NewReservationID(saleID, base)
	}
	// mk returns failed order i, the same each time.
	mk := func(i int) *seckill.FailedOrder {
		return &seckill.FailedOrder{
			ReservationID: resIDs[i],
			SaleID:        saleID,
			UserID:        fmt.Sprintf("用户-%d", i),
			Qty:           int64(i + 1),
			Reason:        fmt.Sprintf("publish: broker said no (%d) — 'quoted' \\ %%", i),
			Attempts:      5,
			Payload:       []byte{0, 1, 2, 0xff, 0xfe, '{', byte(i)},
			CreatedAt:     base.Add(time.Duration(i)*time.Minute + 123456*time.Nanosecond),
		}
	}
	fs := []*seckill.FailedOrder{mk(0), mk(1), mk(2)}
	for _, f := range []*seckill.FailedOrder{fs[1], fs[0], fs[2]} {
		want := *f
		if err := orders.RecordFailedOrder(ctx, f); err != nil {
			t.Fatalf("RecordFailedOrder: %v", err)
		}
		got, err := orders.FailedOrder(ctx, f.ReservationID)
		if err != nil {
			t.Fatalf("FailedOrder: %v", err)
		}
		checkFailedOrder(t, got, &want)
	}

	// A second record of a reservation is a duplicate and changes nothing.
	again := mk(9)
	again.ReservationID = fs[0].ReservationID
	if err := orders.RecordFailedOrder(ctx, again); !errors.Is(err, seckill.ErrDuplicate) {
		t.Errorf("second RecordFailedOrder = %v, want ErrDuplicate", err)
	}
	if got, err := orders.FailedOrder(ctx, fs[0].ReservationID); err != nil {
		t.Fatal(err)
	} else {
		checkFailedOrder(t, got, mk(0))
	}

	// Newest first.
	list, next, err := orders.FailedOrders(ctx, seckill.FailedOrderFilter{Limit: 3})
	if err != nil {
		t.Fatalf("FailedOrders: %v", err)
	}
	var ids []string
	for _, f := range list {
		ids = append(ids, f.ReservationID)
	}
	if want := []string{fs[2].ReservationID, fs[1].ReservationID, fs[0].ReservationID}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("FailedOrders(3) = %v, want newest first %v", ids, want)
	} else if next == "" {
		t.Error("FailedOrders(3) has no next page, though older failed orders exist")
	} else {
		for i, f := range list {
			checkFailedOrder(t, f, mk(2-i))
		}
	}
	if list, _, err := orders.FailedOrders(ctx, seckill.FailedOrderFilter{Limit: 1}); err != nil || len(list) != 1 || list[0].ReservationID != fs[2].ReservationID {
		t.Errorf("FailedOrders(1) = %v, %v; want only the newest", list, err)
	}

	// A dead letter of an undecodable message: only its id and reason are
	// known, and it is recorded all the same, stamped now when undated.
	dead := &seckill.FailedOrder{ReservationID: servicetest.UniqueName("garbage id ") + " ✗", Reason: "decode reservation event: invalid character", Attempts: 5}
	before := time.Now()
	if err := orders.RecordFailedOrder(ctx, dead); err != nil {
		t.Fatalf("RecordFailedOrder(undecodable): %v", err)
	}
	got, err := orders.FailedOrder(ctx, dead.ReservationID)
	if err != nil {
		t.Fatalf("FailedOrder(undecodable): %v", err)
	}
	if got.SaleID != "" || got.UserID != "" || got.Qty != 0 || got.Reason != dead.Reason || len(got.Payload) != 0 {
		t.Errorf("undecodable failed order = %+v, want %+v", got, dead)
	}
	if got.CreatedAt.Before(before.Add(-time.Minute)) || got.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("undated failed order CreatedAt = %v, want about %v", got.CreatedAt, before)
	}
}

func checkFailedOrder(t *testing.T, got, want *seckill.FailedOrder) {
	t.Helper()
	if got.ReservationID != want.ReservationID || got.SaleID != want.SaleID || got.UserID != want.UserID ||
		got.Qty != want.Qty || got.Reason != want.Reason || got.Attempts != want.Attempts ||
		string(got.Payload) != string(want.Payload) {
		t.Errorf("failed order = %+v, want %+v", *got, *want)
	}
	checkStoredTime(t, "failed order CreatedAt", got.CreatedAt, want.CreatedAt)
}

// wantOneOrderEach checks the outcome of buyers user-0-茶 … user-(buyers-1)-茶
// racing at limit 1: each of evsOf's reservations is an order or an over-limit
// failed order, and every buyer holds exactly one order.
func wantOneOrderEach(t *testing.T, orders seckill.OrderStore, evsOf [][]seckill.ReservationEvent, buyers int) {
	t.Helper()
	ctx := t.Context()
	held := map[string]int{}
	for _, evs := range evsOf {
		for _, e := range evs {
			if _, err := orders.Order(ctx, e.ReservationID); err == nil {
				held[e.UserID]++
			} else if !errors.Is(err, seckill.ErrNotFound) {
				t.Fatal(err)
			} else if f, err := orders.FailedOrder(ctx, e.ReservationID); err != nil || !strings.HasPrefix(f.Reason, seckill.ReasonOverLimit) {
				t.Errorf("reservation %s has neither an order nor an over-limit failed order (%+v, %v)", e.ReservationID, f, err)
			}
		}
	}
	for u := range buyers {
		if n := held[fmt.Sprintf("user-%d-茶", u)]; n != 1 {
			t.Errorf("user-%d holds %d orders at limit 1, want 1", u, n)
		}
	}
}
