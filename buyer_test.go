package seckill_test

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestBuyerStatus(t *testing.T) {
	order := func(s seckill.OrderStatus) *seckill.Order { return &seckill.Order{Status: s} }
	failed := &seckill.FailedOrder{}
	for _, c := range []struct {
		name   string
		order  *seckill.Order
		failed *seckill.FailedOrder
		want   string
		ok     bool
	}{
		{"an order shows its status", order(seckill.OrderPlaced), nil, "ordered", true},
		{"paid", order(seckill.OrderPaid), nil, "paid", true},
		{"cancelled", order(seckill.OrderCancelled), nil, "cancelled", true},
		{"refund due", order(seckill.OrderRefundDue), nil, "refund_due", true},
		{"the order wins over a failed order", order(seckill.OrderPaid), failed, "paid", true},
		{"no order, a failed order: failed", nil, failed, seckill.BuyerFailed, true},
		{"neither: pending", nil, nil, seckill.BuyerPending, true},
		{"a status nobody knows is not for the buyer", order("weird"), nil, "weird", false},
	} {
		if got, ok := seckill.BuyerStatus(c.order, c.failed); got != c.want || ok != c.ok {
			t.Errorf("%s: BuyerStatus = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestOrderCanPay(t *testing.T) {
	payBy := time.Date(2026, 12, 6, 9, 15, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status seckill.OrderStatus
		now    time.Time
		want   bool
	}{
		{"awaiting payment, before the deadline", seckill.OrderPlaced, payBy.Add(-time.Millisecond), true},
		{"the deadline itself is too late", seckill.OrderPlaced, payBy, false},
		{"after the deadline", seckill.OrderPlaced, payBy.Add(time.Hour), false},
		{"already paid", seckill.OrderPaid, payBy.Add(-time.Hour), false},
		{"cancelled", seckill.OrderCancelled, payBy.Add(-time.Hour), false},
		{"refund due", seckill.OrderRefundDue, payBy.Add(-time.Hour), false},
	} {
		o := &seckill.Order{Status: c.status, PayBy: payBy}
		if got := o.CanPay(c.now); got != c.want {
			t.Errorf("%s: CanPay = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPayRefusalSaysWhyTheBuyerMayNotPay(t *testing.T) {
	payBy := time.Date(2026, 12, 6, 9, 15, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status seckill.OrderStatus
		now    time.Time
		want   string // the message; "" for no refusal
	}{
		{"awaiting payment, before the deadline", seckill.OrderPlaced, payBy.Add(-time.Millisecond), ""},
		{"the deadline itself is too late", seckill.OrderPlaced, payBy, "payment deadline 2026-12-06T09:15:00Z has passed"},
		{"already paid, even past the deadline", seckill.OrderPaid, payBy.Add(time.Hour), "order is already paid"},
		{"cancelled", seckill.OrderCancelled, payBy.Add(-time.Hour), "order is cancelled"},
		{"refund due, before the deadline", seckill.OrderRefundDue, payBy.Add(-time.Hour), "order is refund_due"},
		{"refund due, past the deadline", seckill.OrderRefundDue, payBy.Add(time.Hour), "payment deadline 2026-12-06T09:15:00Z has passed"},
	} {
		o := &seckill.Order{Status: c.status, PayBy: payBy}
		err := o.PayRefusal(c.now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: PayRefusal = %v, want nil", c.name, err)
		case c.want != "" && (seckill.ErrorCode(err) != seckill.ESTATECONFLICT || seckill.ErrorMessage(err) != c.want):
			t.Errorf("%s: PayRefusal = %v, want %s %q", c.name, err, seckill.ESTATECONFLICT, c.want)
		}
	}
}

func TestShownClaimIsTheOneTheBuyerMustActOn(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	claim := func(id, status string, payBy time.Time) seckill.BuyerClaim {
		return seckill.BuyerClaim{ReservationID: id, Status: status, PayBy: payBy}
	}
	open := claim("r-open", "ordered", now.Add(10*time.Minute))
	sooner := claim("r-sooner", "ordered", now.Add(5*time.Minute))
	late := claim("r-late", "ordered", now)
	paid := claim("r-paid", "paid", now.Add(-time.Hour))
	paid2 := claim("r-paid2", "paid", now.Add(-time.Minute))
	cancelled := claim("r-cancelled", "cancelled", now.Add(-time.Hour))
	refunded := claim("r-refunded", "refunded", now.Add(-time.Hour))
	failed := claim("r-failed", "failed", time.Time{})
	onItsWay := seckill.BuyerClaim{Status: seckill.BuyerPending}
	for _, c := range []struct {
		name    string
		claims  []seckill.BuyerClaim
		pending int64
		want    seckill.BuyerClaim
		ok      bool
	}{
		{"none", nil, 0, seckill.BuyerClaim{}, false},
		{"units on their way, no order yet", nil, 1, onItsWay, true},
		{"awaiting payment", []seckill.BuyerClaim{open}, 0, open, true},
		{"to pay comes before units on their way", []seckill.BuyerClaim{open}, 1, open, true},
		{"the earliest deadline first", []seckill.BuyerClaim{open, sooner}, 0, sooner, true},
		{"an open order before one past its deadline", []seckill.BuyerClaim{late, open}, 0, open, true},
		{"past the deadline, being cancelled", []seckill.BuyerClaim{cancelled, late}, 0, late, true},
		{"on its way before a paid one", []seckill.BuyerClaim{paid}, 2, onItsWay, true},
		{"paid before an ended one", []seckill.BuyerClaim{paid, cancelled}, 0, paid, true},
		{"the latest paid", []seckill.BuyerClaim{paid, paid2}, 0, paid2, true},
		{"only ended claims: the latest", []seckill.BuyerClaim{cancelled, refunded, failed}, 0, failed, true},
		{"an expired claim", []seckill.BuyerClaim{cancelled}, 0, cancelled, true},
	} {
		got, ok := seckill.ShownClaim(c.claims, c.pending, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: ShownClaim = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestBuyerClaimHolds(t *testing.T) {
	for status, want := range map[string]bool{
		seckill.BuyerPending: true, "ordered": true, "paid": true,
		"cancelled": false, "refund_due": false, "refunded": false, seckill.BuyerFailed: false, "": false,
	} {
		if got := (seckill.BuyerClaim{Status: status}).Holds(); got != want {
			t.Errorf("%q: Holds = %v, want %v", status, got, want)
		}
	}
}

// TestBuyerFailReasonShowsOnlyCodes: a buyer hears why a reservation
// failed only as a code; a driver's error or the detail stays internal.
func TestBuyerFailReasonShowsOnlyCodes(t *testing.T) {
	for reason, want := range map[string]string{
		seckill.ReasonLostInStockStore + ": issued 2026-12-06T09:00:00Z": seckill.ReasonLostInStockStore,
		seckill.ReasonOverLimit + ": qty 1, buyer holds 2 of 2":          seckill.EPURCHASELIMIT,
		seckill.ReasonInsufficientStock + ": qty 2, 1 left":              seckill.ESOLDOUT,
		seckill.ReasonInsufficientStock:                                  seckill.ESOLDOUT,
		"attempts exhausted: dial tcp 10.0.0.7:3306: connection refused": "",
		"": "",
	} {
		if got := seckill.BuyerFailReason(reason); got != want {
			t.Errorf("BuyerFailReason(%q) = %q; want %q", reason, got, want)
		}
	}
}
