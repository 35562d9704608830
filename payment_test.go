package seckill_test

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestDecidePayment(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	order := func(s seckill.OrderStatus, payBy time.Time) *seckill.Order {
		return &seckill.Order{ReservationID: "s1.01ARZ3NDEKTSV4RRFFQ69G5FAV", AmountCents: 1200, Status: s, PayBy: payBy}
	}
	ev := func(typ seckill.PaymentEventType, cents int64, cur string) seckill.PaymentEvent {
		return seckill.PaymentEvent{ID: "evt_1", Type: typ, ReservationID: "s1.01ARZ3NDEKTSV4RRFFQ69G5FAV", AmountCents: cents, Currency: cur}
	}
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	var (
		paid   = seckill.PaymentSucceeded
		failed = seckill.PaymentFailed
		refund = seckill.RefundSucceeded
	)
	cases := []struct {
		name    string
		status  seckill.OrderStatus
		payBy   time.Time
		event   seckill.PaymentEvent
		outcome seckill.PaymentOutcome
		to      seckill.OrderStatus
	}{
		{"payment in time", seckill.OrderPlaced, later, ev(paid, 1200, "EUR"), seckill.PaymentApplied, seckill.OrderPaid},
		{"payment past deadline, unit still held", seckill.OrderPlaced, earlier, ev(paid, 1200, "EUR"), seckill.PaymentApplied, seckill.OrderPaid},
		{"payment at the deadline", seckill.OrderPlaced, now, ev(paid, 1200, "EUR"), seckill.PaymentApplied, seckill.OrderPaid},
		{"payment after cancel", seckill.OrderCancelled, earlier, ev(paid, 1200, "EUR"), seckill.PaymentRefundDue, seckill.OrderRefundDue},
		{"second payment of a paid order", seckill.OrderPaid, later, ev(paid, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderPaid},
		{"payment of a refund_due order", seckill.OrderRefundDue, earlier, ev(paid, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderRefundDue},
		{"payment of a refunded order", seckill.OrderRefunded, earlier, ev(paid, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderRefunded},
		{"amount short", seckill.OrderPlaced, later, ev(paid, 1199, "EUR"), seckill.PaymentMismatch, seckill.OrderPlaced},
		{"amount over", seckill.OrderPlaced, later, ev(paid, 1201, "EUR"), seckill.PaymentMismatch, seckill.OrderPlaced},
		{"currency other", seckill.OrderPlaced, later, ev(paid, 1200, "USD"), seckill.PaymentMismatch, seckill.OrderPlaced},
		{"mismatch beats cancelled", seckill.OrderCancelled, earlier, ev(paid, 1, "EUR"), seckill.PaymentMismatch, seckill.OrderCancelled},
		{"failed payment", seckill.OrderPlaced, later, ev(failed, 1200, "EUR"), seckill.PaymentNoted, seckill.OrderPlaced},
		{"failed payment of a cancelled order", seckill.OrderCancelled, earlier, ev(failed, 1200, "EUR"), seckill.PaymentNoted, seckill.OrderCancelled},
		{"refund of refund_due", seckill.OrderRefundDue, earlier, ev(refund, 1200, "EUR"), seckill.PaymentApplied, seckill.OrderRefunded},
		{"refund of a paid order", seckill.OrderPaid, later, ev(refund, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderPaid},
		{"refund of an unpaid order", seckill.OrderPlaced, later, ev(refund, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderPlaced},
		{"second refund", seckill.OrderRefunded, earlier, ev(refund, 1200, "EUR"), seckill.PaymentConflict, seckill.OrderRefunded},
		{"partial refund", seckill.OrderRefundDue, earlier, ev(refund, 600, "EUR"), seckill.PaymentMismatch, seckill.OrderRefundDue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := seckill.DecidePayment(order(c.status, c.payBy), "EUR", c.event, now)
			if d.Outcome != c.outcome || d.To != c.to || d.From != c.status || d.Detail == "" {
				t.Fatalf("DecidePayment = %+v, want outcome %s, %s -> %s", d, c.outcome, c.status, c.to)
			}
			if d.Moves() != (c.to != c.status) {
				t.Fatalf("Moves() = %v", d.Moves())
			}
			if !c.to.Known() {
				t.Fatalf("%s is not Known", c.to)
			}
		})
	}
}

func TestOrderStatusHolds(t *testing.T) {
	for s, want := range map[seckill.OrderStatus]bool{
		seckill.OrderPlaced: true, seckill.OrderPaid: true,
		seckill.OrderCancelled: false, seckill.OrderRefundDue: false, seckill.OrderRefunded: false, "bogus": false,
	} {
		if s.Holds() != want {
			t.Errorf("%s.Holds() = %v, want %v", s, !want, want)
		}
	}
	if seckill.OrderStatus("bogus").Known() {
		t.Error("bogus is Known")
	}
}

func TestPaymentEventValidate(t *testing.T) {
	good := seckill.PaymentEvent{ID: "evt_1", Type: seckill.PaymentSucceeded, ReservationID: "s1.01ARZ3NDEKTSV4RRFFQ69G5FAV", AmountCents: 1200, Currency: "EUR"}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	long := make([]byte, seckill.MaxPaymentEventIDBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, mut := range map[string]func(*seckill.PaymentEvent){
		"no id":           func(e *seckill.PaymentEvent) { e.ID = "" },
		"long id":         func(e *seckill.PaymentEvent) { e.ID = string(long) },
		"space in id":     func(e *seckill.PaymentEvent) { e.ID = "evt 1" },
		"unknown type":    func(e *seckill.PaymentEvent) { e.Type = "payment.pending" },
		"bad reservation": func(e *seckill.PaymentEvent) { e.ReservationID = "nope" },
		"negative amount": func(e *seckill.PaymentEvent) { e.AmountCents = -1 },
		"lower currency":  func(e *seckill.PaymentEvent) { e.Currency = "eur" },
		"no currency":     func(e *seckill.PaymentEvent) { e.Currency = "" },
	} {
		e := good
		mut(&e)
		if err := e.Validate(); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("%s: Validate = %v, want EINVALID", name, err)
		}
	}
}

func TestPaymentDecisionEventType(t *testing.T) {
	for _, c := range []struct {
		from, to seckill.OrderStatus
		want     seckill.OrderEventType
	}{
		{seckill.OrderPlaced, seckill.OrderPaid, seckill.EventOrderPaid},
		{seckill.OrderCancelled, seckill.OrderRefundDue, seckill.EventOrderRefundDue},
		{seckill.OrderRefundDue, seckill.OrderRefunded, seckill.EventOrderRefunded},
		{seckill.OrderPaid, seckill.OrderPaid, ""},
	} {
		typ, ok := seckill.PaymentDecision{From: c.from, To: c.to}.EventType()
		if typ != c.want || ok != (c.want != "") {
			t.Errorf("%s -> %s: EventType = %q, %v; want %q", c.from, c.to, typ, ok, c.want)
		}
	}
}
