package seckill

import "testing"

func TestPendingUnits(t *testing.T) {
	o := func(qty int64, st OrderStatus) *Order { return &Order{Qty: qty, Status: st} }
	for _, c := range []struct {
		name   string
		held   int64
		orders []*Order
		want   int64
	}{
		{"nothing", 0, nil, 0},
		{"a claim on its way", 1, nil, 1},
		{"ordered", 2, []*Order{o(2, OrderPlaced)}, 0},
		{"one of two ordered", 3, []*Order{o(1, OrderPaid)}, 2},
		{"cancelled orders hold nothing", 1, []*Order{o(1, OrderCancelled)}, 1},
		{"count behind the orders", 0, []*Order{o(1, OrderPlaced)}, 0},
	} {
		if got := PendingUnits(c.held, c.orders); got != c.want {
			t.Errorf("%s: PendingUnits(%d, …) = %d; want %d", c.name, c.held, got, c.want)
		}
	}
}
