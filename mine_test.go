package seckill

import (
	"slices"
	"testing"
	"time"
)

func TestPendingUnits(t *testing.T) {
	o := func(qty int64, st OrderStatus) BuyerRecord { return BuyerRecord{Order: &Order{Qty: qty, Status: st}} }
	f := func(qty int64, reason string) BuyerRecord {
		return BuyerRecord{Failed: &FailedOrder{Qty: qty, Reason: reason}}
	}
	for _, c := range []struct {
		name string
		held int64
		recs []BuyerRecord
		want int64
	}{
		{"nothing", 0, nil, 0},
		{"a claim on its way", 1, nil, 1},
		{"ordered", 2, []BuyerRecord{o(2, OrderPlaced)}, 0},
		{"one of two ordered", 3, []BuyerRecord{o(1, OrderPaid)}, 2},
		{"cancelled orders hold nothing", 1, []BuyerRecord{o(1, OrderCancelled)}, 1},
		{"count behind the orders", 0, []BuyerRecord{o(1, OrderPlaced)}, 0},
		{"a failed claim the stock store keeps is not on its way", 2, []BuyerRecord{f(2, "attempts exhausted: timeout")}, 0},
		{"one failed, one on its way", 2, []BuyerRecord{f(1, ReasonOverLimit+": qty 1")}, 1},
		{"a refused claim already released", 0, []BuyerRecord{f(1, ReasonInsufficientStock)}, 0},
		{"ordered, failed and on its way", 4, []BuyerRecord{o(1, OrderPlaced), f(2, "x")}, 1},
	} {
		if got := PendingUnits(c.held, c.recs); got != c.want {
			t.Errorf("%s: PendingUnits(%d, …) = %d; want %d", c.name, c.held, got, c.want)
		}
	}
}

// TestBuyerRecordsListsFailedClaimsOnce: a buyer's failed orders are listed
// with their orders, oldest first, and a re-driven one only as its order.
func TestBuyerRecordsListsFailedClaimsOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	o := func(id string, min int) *Order {
		return &Order{ReservationID: id, CreatedAt: t0.Add(time.Duration(min) * time.Minute)}
	}
	f := func(id string, min int) *FailedOrder {
		return &FailedOrder{ReservationID: id, CreatedAt: t0.Add(time.Duration(min) * time.Minute)}
	}
	idsOf := func(recs []BuyerRecord) (ids []string) {
		for _, r := range recs {
			switch {
			case r.Order != nil && r.Failed == nil:
				ids = append(ids, "o:"+r.Order.ReservationID)
			case r.Failed != nil && r.Order == nil:
				ids = append(ids, "f:"+r.Failed.ReservationID)
			default:
				ids = append(ids, "?:bad record")
			}
		}
		return ids
	}
	for _, c := range []struct {
		name   string
		orders []*Order
		failed []*FailedOrder
		want   []string
	}{
		{"nothing", nil, nil, nil},
		{"orders only", []*Order{o("a", 1), o("b", 2)}, nil, []string{"o:a", "o:b"}},
		{"a failed claim alone", nil, []*FailedOrder{f("a", 1)}, []string{"f:a"}},
		{"failed and ordered, oldest first", []*Order{o("a", 1), o("c", 3)}, []*FailedOrder{f("b", 2), f("d", 4)},
			[]string{"o:a", "f:b", "o:c", "f:d"}},
		{"a re-driven claim is its order", []*Order{o("a", 5)}, []*FailedOrder{f("a", 1), f("b", 2)}, []string{"f:b", "o:a"}},
		{"same instant: orders first", []*Order{o("a", 1)}, []*FailedOrder{f("b", 1)}, []string{"o:a", "f:b"}},
	} {
		if got := idsOf(BuyerRecords(c.orders, c.failed)); !slices.Equal(got, c.want) {
			t.Errorf("%s: BuyerRecords = %v; want %v", c.name, got, c.want)
		}
	}
}
