package sqlstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// allEvents lists every event in the outbox, oldest first.
func allEvents(t *testing.T, es *EventStore) []*seckill.EventDelivery {
	t.Helper()
	ds, err := es.Events(t.Context(), "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
		ds[i], ds[j] = ds[j], ds[i]
	}
	return ds
}

// TestNoSinkNoEventRows: without EnableOrderEvents the order changes write
// no event rows.
func TestNoSinkNoEventRows(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 2)
		evs := events("tea", 1, 1, 1)
		persist(t, st, "tea", evs)
		if _, _, err := st.Restores.RestoreOrder(t.Context(), evs[0].ReservationID, "timeout", time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := allEvents(t, NewEventStore(db)); len(got) != 0 {
			t.Errorf("%d event rows with no sink, want 0", len(got))
		}
	})
}

// TestOrderChangesRecordTheirEvents: each change of an order commits its
// event with it: created and failed from the writer, paid, cancelled by a
// restore (one and many), failed by a dead letter, created by a re-drive;
// with the sale's currency and the order's amount.
func TestOrderChangesRecordTheirEvents(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		db.EnableOrderEvents()
		ctx := t.Context()
		s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 250, Stock: 4, PurchaseLimit: 10, Currency: "JPY",
			StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
		if err := NewSaleStore(db).CreateSale(ctx, s); err != nil {
			t.Fatal(err)
		}
		evs := events("tea", 1, 2, 1, 3) // the last is rejected: 4 units
		persist(t, st, "tea", evs)
		if _, err := st.PayOrder(ctx, evs[0].ReservationID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Restores.RestoreOrder(ctx, evs[1].ReservationID, "timeout", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Restores.RestoreOrders(ctx, "tea", []string{evs[2].ReservationID}, "timeout", time.Now()); err != nil {
			t.Fatal(err)
		}
		dead := seckill.NewReservationID("tea", time.Now())
		if err := st.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: dead, SaleID: "tea", UserID: "bob", Qty: 2, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.ResolveFailedOrder(ctx, dead, seckill.ResolveRedrive, "", "op", time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}

		type row struct {
			typ    seckill.OrderEventType
			res    string
			amount int64
		}
		want := []row{
			{seckill.EventOrderCreated, evs[0].ReservationID, 250},
			{seckill.EventOrderCreated, evs[1].ReservationID, 500},
			{seckill.EventOrderCreated, evs[2].ReservationID, 250},
			{seckill.EventOrderFailed, evs[3].ReservationID, 750},
			{seckill.EventOrderPaid, evs[0].ReservationID, 250},
			{seckill.EventOrderCancelled, evs[1].ReservationID, 500},
			{seckill.EventOrderCancelled, evs[2].ReservationID, 250},
			{seckill.EventOrderFailed, dead, 500},
			{seckill.EventOrderCreated, dead, 500},
		}
		got := allEvents(t, NewEventStore(db))
		if len(got) != len(want) {
			for _, d := range got {
				t.Logf("%s %s", d.Event.Type, d.Event.ReservationID)
			}
			t.Fatalf("%d events, want %d", len(got), len(want))
		}
		for i, w := range want {
			e := got[i].Event
			if e.Type != w.typ || e.ReservationID != w.res || e.AmountCents != w.amount || e.Currency != "JPY" ||
				e.OrderID != seckill.OrderIDOf(w.res) || e.ID != seckill.OrderEventID(w.typ, w.res) || e.SaleID != "tea" {
				t.Errorf("event %d = %+v, want %s of %s, %d JPY", i, e, w.typ, w.res, w.amount)
			}
			if got[i].State != seckill.DeliveryPending || got[i].Attempts != 0 || e.At.IsZero() {
				t.Errorf("event %d: state %s, %d attempts, at %v; want pending, 0, set", i, got[i].State, got[i].Attempts, e.At)
			}
		}

		// A redelivered batch and a second restore change nothing, and
		// record nothing.
		persist(t, st, "tea", evs)
		if _, _, err := st.Restores.RestoreOrder(ctx, evs[1].ReservationID, "again", time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := len(allEvents(t, NewEventStore(db))); n != len(want) {
			t.Errorf("%d events after repeats, want %d", n, len(want))
		}
	})
}

// TestEventRollsBackWithItsChange: an event is never recorded for a change
// that did not commit. The writer's transaction fails after its inserts
// (a failing stock update is simulated by the version moving every time)
// and leaves no event behind.
func TestEventRollsBackWithItsChange(t *testing.T) {
	onDialects(t, dialects[1:], func(t *testing.T, db *DB, st *OrderStore) {
		db.EnableOrderEvents()
		createSale(t, db, "tea", 5)
		st.maxAttempts = 2
		st.beforeTakeStock = func(int) {
			if _, err := db.write.ExecContext(t.Context(), `UPDATE sales SET version = version + 1`); err != nil {
				t.Error(err)
			}
		}
		if _, err := st.PersistReservations(t.Context(), "tea", events("tea", 1), time.Now(), time.Minute); err == nil {
			t.Fatal("persist succeeded with the version moving every time")
		}
		if got := allEvents(t, NewEventStore(db)); len(got) != 0 {
			t.Errorf("%d events of a rolled-back batch, want 0", len(got))
		}
	})
}

// TestClaimDeliversAnOrderInTurn: only the first undelivered event of an
// order is claimable; a failing event holds back its order's later events
// only; a dead event keeps holding them until it is redelivered.
func TestClaimDeliversAnOrderInTurn(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		db.EnableOrderEvents()
		ctx := t.Context()
		es := NewEventStore(db)
		createSale(t, db, "tea", 5)
		evs := events("tea", 1, 1)
		persist(t, st, "tea", evs)
		for _, e := range evs {
			if _, err := st.PayOrder(ctx, e.ReservationID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now().Add(time.Second)
		claim := func(owner string, at time.Time) []*seckill.EventDelivery {
			t.Helper()
			ds, err := es.Claim(ctx, owner, at, time.Minute, 100)
			if err != nil {
				t.Fatal(err)
			}
			return ds
		}
		first := claim("a", now)
		if len(first) != 2 || first[0].Event.Type != seckill.EventOrderCreated || first[1].Event.Type != seckill.EventOrderCreated {
			t.Fatalf("first claim = %v, want both orders' order.created", first)
		}
		if first[0].Attempts != 1 {
			t.Errorf("claimed with %d attempts, want 1", first[0].Attempts)
		}
		if again := claim("b", now); len(again) != 0 {
			t.Errorf("a second owner claimed %d leased or held-back events, want 0", len(again))
		}
		// Order 0's created is delivered: its paid comes up. Order 1's
		// created fails: its paid stays behind it.
		if err := es.Delivered(ctx, []int64{first[0].Seq}, now); err != nil {
			t.Fatal(err)
		}
		if ok, err := es.Failed(ctx, first[1].Seq, "b", "not mine", now.Add(time.Hour), false, now); err != nil || ok {
			t.Errorf("Failed by a non-owner = %v, %v; want false", ok, err)
		}
		if ok, err := es.Failed(ctx, first[1].Seq, "a", "500", now.Add(time.Hour), false, now); err != nil || !ok {
			t.Fatalf("Failed = %v, %v; want true", ok, err)
		}
		second := claim("b", now)
		if len(second) != 1 || second[0].Event.Type != seckill.EventOrderPaid || second[0].Event.ReservationID != evs[0].ReservationID {
			t.Fatalf("second claim = %v, want order 0's order.paid only", second)
		}
		if err := es.Delivered(ctx, []int64{second[0].Seq}, now); err != nil {
			t.Fatal(err)
		}
		// Order 1's created is due again in an hour; then it dies.
		later := now.Add(time.Hour)
		retry := claim("a", later)
		if len(retry) != 1 || retry[0].Seq != first[1].Seq || retry[0].Attempts != 2 {
			t.Fatalf("retry = %v, want order 1's created at its second attempt", retry)
		}
		if _, err := es.Failed(ctx, retry[0].Seq, "a", "500 again", time.Time{}, true, later); err != nil {
			t.Fatal(err)
		}
		if ds := claim("a", later.Add(48*time.Hour)); len(ds) != 0 {
			t.Errorf("claimed %v behind a dead event, want nothing", ds)
		}
		stats, err := es.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Dead != 1 || stats.Pending != 1 {
			t.Errorf("stats = %+v, want 1 dead, 1 pending", stats)
		}
		deadID := retry[0].Event.ID
		if _, err := es.Redeliver(ctx, first[0].Event.ID, later); seckill.ErrorCode(err) != seckill.ESTATECONFLICT {
			t.Errorf("redeliver a delivered event: %v, want %s", err, seckill.ESTATECONFLICT)
		}
		if _, err := es.Redeliver(ctx, "nope", later); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("redeliver an unknown event: %v, want ErrNotFound", err)
		}
		d, err := es.Redeliver(ctx, deadID, later)
		if err != nil || d.State != seckill.DeliveryPending || !d.RetryFrom.Equal(fromMillis(toMillis(later))) {
			t.Fatalf("Redeliver = %+v, %v; want pending with a fresh window", d, err)
		}
		back := claim("a", later)
		if len(back) != 1 || back[0].Event.ID != deadID {
			t.Fatalf("after redelivery claimed %v, want the redelivered event", back)
		}
		if err := es.Delivered(ctx, []int64{back[0].Seq}, later); err != nil {
			t.Fatal(err)
		}
		last := claim("a", later)
		if len(last) != 1 || last[0].Event.Type != seckill.EventOrderPaid || last[0].Event.ReservationID != evs[1].ReservationID {
			t.Fatalf("last claim = %v, want order 1's paid", last)
		}
	})
}

// TestClaimLeaseExpires: an event whose deliverer died is claimed again
// once its lease ends, not before.
func TestClaimLeaseExpires(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		db.EnableOrderEvents()
		es := NewEventStore(db)
		createSale(t, db, "tea", 5)
		persist(t, st, "tea", events("tea", 1))
		now := time.Now().Add(time.Second)
		if ds, err := es.Claim(t.Context(), "a", now, 30*time.Second, 10); err != nil || len(ds) != 1 {
			t.Fatalf("Claim = %v, %v", ds, err)
		}
		if ds, _ := es.Claim(t.Context(), "b", now.Add(29*time.Second), 30*time.Second, 10); len(ds) != 0 {
			t.Errorf("claimed %d events under a live lease", len(ds))
		}
		ds, err := es.Claim(t.Context(), "b", now.Add(31*time.Second), 30*time.Second, 10)
		if err != nil || len(ds) != 1 || ds[0].Attempts != 2 {
			t.Fatalf("after the lease: Claim = %v, %v; want the event at its second attempt", ds, err)
		}
		// The first owner's late failure no longer counts.
		if ok, _ := es.Failed(t.Context(), ds[0].Seq, "a", "late", now.Add(time.Hour), false, now); ok {
			t.Error("a lapsed owner recorded a failure")
		}
	})
}

// ordersWithEvents records events on db, creates sale "tea" of n units
// and persists n orders of one unit, 100 a batch: n pending
// order.created events. It returns the outbox.
func ordersWithEvents(t *testing.T, db *DB, st *OrderStore, n int) *EventStore {
	t.Helper()
	db.EnableOrderEvents()
	createSale(t, db, "tea", int64(n))
	for done := 0; done < n; done += 100 {
		qtys := make([]int64, min(100, n-done))
		for i := range qtys {
			qtys[i] = 1
		}
		persist(t, st, "tea", events("tea", qtys...))
	}
	return NewEventStore(db)
}

// TestClaimTakesTheMostOverdueFirst: while a sink fails, a claim takes
// the events longest due, not the lowest seqs. 300 events are due and
// each claim takes 100, whose failure makes them due again at once (a
// short backoff, or a long outage where thousands wait on the longest
// one): every event is attempted within three claims. Taking the lowest
// seqs, the claims took the same 100 for ever and the other 200 were
// never attempted.
func TestClaimTakesTheMostOverdueFirst(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		es := ordersWithEvents(t, db, st, 300)
		attempted := map[int64]int{}
		now := time.Now().Add(time.Second)
		for round := range 3 {
			now = now.Add(time.Millisecond)
			ds, err := es.Claim(t.Context(), "node", now, time.Minute, 100)
			if err != nil || len(ds) != 100 {
				t.Fatalf("claim %d: %d events, %v; want 100", round, len(ds), err)
			}
			for _, d := range ds {
				attempted[d.Seq]++
				// Failed, and due again at once.
				if ok, err := es.Failed(t.Context(), d.Seq, "node", "the receiver answered 503", now, false, now); !ok || err != nil {
					t.Fatalf("Failed(%d) = %v, %v", d.Seq, ok, err)
				}
			}
		}
		if len(attempted) != 300 {
			t.Errorf("three claims of 100 attempted %d distinct events of 300 due", len(attempted))
		}
	})
}

// TestConcurrentClaimsNeverShare: deliverers claiming at once never hold
// the same event.
func TestConcurrentClaimsNeverShare(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		es := ordersWithEvents(t, db, st, 400)
		now := time.Now().Add(time.Second)
		var (
			mu   sync.Mutex
			seen = map[int64]string{}
			wg   sync.WaitGroup
		)
		for w := range 4 {
			owner := fmt.Sprintf("node%d", w)
			wg.Go(func() {
				for range 20 {
					ds, err := es.Claim(t.Context(), owner, now, time.Minute, 25)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, d := range ds {
						if prev, dup := seen[d.Seq]; dup {
							t.Errorf("event %d claimed by %s and %s", d.Seq, prev, owner)
						}
						seen[d.Seq] = owner
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 400 {
			t.Errorf("%d events claimed, want all 400", len(seen))
		}
	})
}
