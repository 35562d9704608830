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
