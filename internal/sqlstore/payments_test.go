package sqlstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func payment(id string, typ seckill.PaymentEventType, reservationID string, cents int64) seckill.PaymentEvent {
	return seckill.PaymentEvent{ID: id, Type: typ, ReservationID: reservationID, AmountCents: cents, Currency: "EUR"}
}

func wantStatus(t *testing.T, st *OrderStore, id string, want seckill.OrderStatus) *seckill.Order {
	t.Helper()
	o, err := st.Order(t.Context(), id)
	if err != nil || o.Status != want {
		t.Fatalf("order %s = %+v, %v; want status %s", id, o, err, want)
	}
	return o
}

// TestPayments: what each payment event does to its order, stored once
// per event id, on every dialect.
func TestPayments(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		db.EnableOrderEvents()
		p := NewPayments(st, "EUR")
		createSale(t, db, "tea", 10)
		evs := events("tea", 1, 1, 2, 1)
		persist(t, st, "tea", evs)
		paid, mismatched, late := evs[0].ReservationID, evs[1].ReservationID, evs[2].ReservationID
		now := time.Now()

		// A payment in time pays the order.
		rec, err := p.ApplyPayment(ctx, payment("evt_1", seckill.PaymentSucceeded, paid, 100), seckill.SourceWebhook, now)
		if err != nil || rec.Outcome != seckill.PaymentApplied || rec.Replayed || rec.ToStatus != seckill.OrderPaid || rec.OrderID != seckill.OrderIDOf(paid) {
			t.Fatalf("payment = %+v, %v", rec, err)
		}
		before := wantStatus(t, st, paid, seckill.OrderPaid)

		// The same event again: the first record, replayed, and nothing
		// changes.
		again, err := p.ApplyPayment(ctx, payment("evt_1", seckill.PaymentSucceeded, paid, 100), seckill.SourceService, now.Add(time.Second))
		if err != nil || !again.Replayed || again.Outcome != seckill.PaymentApplied || again.Source != seckill.SourceWebhook || !again.ReceivedAt.Equal(rec.ReceivedAt) {
			t.Fatalf("replay = %+v, %v", again, err)
		}
		if after := wantStatus(t, st, paid, seckill.OrderPaid); !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("a replay touched the order: updated %s, was %s", after.UpdatedAt, before.UpdatedAt)
		}
		// The same id with other fields is refused.
		if _, err := p.ApplyPayment(ctx, payment("evt_1", seckill.PaymentSucceeded, paid, 99), seckill.SourceWebhook, now); seckill.ErrorCode(err) != seckill.EKEYREUSED {
			t.Fatalf("reused id = %v, want %s", err, seckill.EKEYREUSED)
		}

		// A wrong amount, or a wrong currency, moves nothing and is
		// recorded.
		rec, err = p.ApplyPayment(ctx, payment("evt_2", seckill.PaymentSucceeded, mismatched, 1), seckill.SourceWebhook, now)
		if err != nil || rec.Outcome != seckill.PaymentMismatch || rec.ToStatus != seckill.OrderPlaced {
			t.Fatalf("mismatch = %+v, %v", rec, err)
		}
		usd := payment("evt_3", seckill.PaymentSucceeded, mismatched, 100)
		usd.Currency = "USD"
		if rec, err = p.ApplyPayment(ctx, usd, seckill.SourceWebhook, now); err != nil || rec.Outcome != seckill.PaymentMismatch {
			t.Fatalf("currency mismatch = %+v, %v", rec, err)
		}
		wantStatus(t, st, mismatched, seckill.OrderPlaced)

		// Cancelled and its units back (the sweeper's database step);
		// then the money comes: refund_due, and the stock stays back.
		if _, changed, err := st.Restores.RestoreOrder(ctx, late, seckill.ReasonPayTimeout, now); err != nil || !changed {
			t.Fatalf("restore: %v, %v", changed, err)
		}
		stock, _ := saleRow(t, db, "tea")
		rec, err = p.ApplyPayment(ctx, payment("evt_4", seckill.PaymentSucceeded, late, 200), seckill.SourceWebhook, now.Add(2*time.Second))
		if err != nil || rec.Outcome != seckill.PaymentRefundDue || rec.FromStatus != seckill.OrderCancelled || rec.ToStatus != seckill.OrderRefundDue {
			t.Fatalf("late payment = %+v, %v", rec, err)
		}
		wantStatus(t, st, late, seckill.OrderRefundDue)
		if got, _ := saleRow(t, db, "tea"); got != stock {
			t.Fatalf("stock %d after a late payment, was %d", got, stock)
		}
		// A restore of it changes nothing: its units went back already.
		if _, changed, err := st.Restores.RestoreOrder(ctx, late, "again", now); err != nil || changed {
			t.Fatalf("restore of refund_due: changed %v, %v", changed, err)
		}
		rec, err = p.ApplyPayment(ctx, payment("evt_5", seckill.RefundSucceeded, late, 200), seckill.SourceService, now.Add(3*time.Second))
		if err != nil || rec.Outcome != seckill.PaymentApplied || rec.ToStatus != seckill.OrderRefunded {
			t.Fatalf("refund = %+v, %v", rec, err)
		}
		wantStatus(t, st, late, seckill.OrderRefunded)

		// No order (yet): nothing stored, the provider retries.
		unknown := seckill.NewReservationID("tea", now)
		if _, err := p.ApplyPayment(ctx, payment("evt_6", seckill.PaymentSucceeded, unknown, 100), seckill.SourceWebhook, now); !errors.Is(err, seckill.ErrNotFound) {
			t.Fatalf("unknown reservation = %v, want ErrNotFound", err)
		}
		if n := countRows(t, db, "payment_events", "tea"); n != 5 {
			t.Fatalf("%d payment events stored, want 5", n)
		}
		// Each move's order event went to the outbox with it, once.
		for id, want := range map[string]string{
			paid:       "[order.created order.paid]",
			mismatched: "[order.created]",
			late:       "[order.created order.cancelled order.refund_due order.refunded]",
		} {
			if got := orderEventTypes(t, db, id); got != want {
				t.Errorf("order events of %s: %s, want %s", id, got, want)
			}
		}

		// The operator's list: those that alert, newest first, a page
		// at a time; and one outcome.
		var got []string
		for before := ""; ; {
			page, next, err := p.Payments(ctx, seckill.PaymentFilter{Limit: 1, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				got = append(got, r.ID+":"+string(r.Outcome))
			}
			if next == "" {
				break
			}
			before = next
		}
		if want := "[evt_4:refund_due evt_3:mismatch evt_2:mismatch]"; fmt.Sprint(got) != want {
			t.Fatalf("alerting payments = %v, want %s", got, want)
		}
		applied, _, err := p.Payments(ctx, seckill.PaymentFilter{Outcome: seckill.PaymentApplied, Limit: 10})
		if err != nil || len(applied) != 2 || applied[0].ID != "evt_5" || applied[1].ID != "evt_1" {
			t.Fatalf("applied payments = %v, %v", applied, err)
		}
		for _, f := range []seckill.PaymentFilter{{Limit: 0}, {Limit: 1001}, {Limit: 1, Outcome: "bogus"}, {Limit: 1, Before: "nope"}} {
			if _, _, err := p.Payments(ctx, f); seckill.ErrorCode(err) != seckill.EINVALID {
				t.Errorf("Payments(%+v) = %v, want EINVALID", f, err)
			}
		}
	})
}

// orderEventTypes lists the types of a reservation's order events in the
// outbox, in order.
func orderEventTypes(t *testing.T, db *DB, reservationID string) string {
	t.Helper()
	rows, err := db.read.QueryContext(t.Context(), `SELECT type FROM order_events WHERE reservation_id = `+db.dialect.sql.bind(1)+` ORDER BY seq`, reservationID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var types []string
	for rows.Next() {
		var typ string
		if err := rows.Scan(&typ); err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(types)
}

// TestPaymentRaces: one event delivered many times at once applies once;
// a payment racing the payment timeout's cancel either pays the order
// (and the restore is refused: a paid order's units are never given back)
// or finds it cancelled (refund_due): never both, and the stock adds up.
func TestPaymentRaces(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		ctx := t.Context()
		p := NewPayments(st, "EUR")
		createSale(t, db, "tea", 40)
		evs := events("tea", 1, 1, 1, 1, 1, 1, 1, 1, 1)
		persist(t, st, "tea", evs)

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			applied int
		)
		for range 8 {
			wg.Go(func() {
				rec, err := p.ApplyPayment(ctx, payment("evt_same", seckill.PaymentSucceeded, evs[0].ReservationID, 100), seckill.SourceWebhook, time.Now())
				if err != nil {
					t.Errorf("apply: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !rec.Replayed {
					applied++
				}
			})
		}
		wg.Wait()
		if applied != 1 {
			t.Fatalf("one event applied %d times", applied)
		}
		if n := countRows(t, db, "payment_events", "tea"); n != 1 {
			t.Fatalf("%d rows for one event", n)
		}

		stock0, _ := saleRow(t, db, "tea")
		var restored int64
		for i, e := range evs[1:] {
			var payErr, restoreErr error
			var changed bool
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, payErr = p.ApplyPayment(ctx, payment(fmt.Sprint("evt_race_", i), seckill.PaymentSucceeded, e.ReservationID, 100), seckill.SourceWebhook, time.Now())
			}()
			go func() {
				defer wg.Done()
				_, changed, restoreErr = st.Restores.RestoreOrder(ctx, e.ReservationID, seckill.ReasonPayTimeout, time.Now())
			}()
			wg.Wait()
			if payErr != nil {
				t.Fatalf("pay: %v", payErr)
			}
			o, err := st.Order(ctx, e.ReservationID)
			if err != nil {
				t.Fatal(err)
			}
			switch o.Status {
			case seckill.OrderPaid: // the payment won: the restore was refused
				if seckill.ErrorCode(restoreErr) != seckill.ESTATECONFLICT || changed {
					t.Fatalf("paid order restored: changed %v, %v", changed, restoreErr)
				}
			case seckill.OrderRefundDue: // the cancel won
				if restoreErr != nil || !changed {
					t.Fatalf("refund_due without its restore: changed %v, %v", changed, restoreErr)
				}
				restored++
			default:
				t.Fatalf("order after the race: %s", o.Status)
			}
		}
		if got, _ := saleRow(t, db, "tea"); got != stock0+restored {
			t.Fatalf("stock %d, want %d + %d restored", got, stock0, restored)
		}
		t.Logf("%d of %d races went to the cancel", restored, len(evs)-1)

		// The sweeper's batch restore of a paid order is refused too.
		res, err := st.Restores.RestoreOrders(ctx, "tea", []string{evs[0].ReservationID}, seckill.ReasonPayTimeout, time.Now())
		if err != nil || seckill.ErrorCode(res[0].Err) != seckill.ESTATECONFLICT {
			t.Fatalf("batch restore of a paid order = %+v, %v", res, err)
		}
		wantStatus(t, st, evs[0].ReservationID, seckill.OrderPaid)
	})
}
