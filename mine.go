package seckill

import (
	"slices"
	"time"
)

// BuyerRecord is one of a buyer's claims on a sale as the database holds
// it: its order, or else its failed order.
type BuyerRecord struct {
	Order  *Order
	Failed *FailedOrder
}

// BuyerRecords is what GET …/reservations/mine lists of a buyer's claims on
// a sale: their orders and their failed orders, oldest first by when each
// was written. A failed order whose reservation has an order (an operator
// re-drove it) is that order.
func BuyerRecords(orders []*Order, failed []*FailedOrder) []BuyerRecord {
	recs := make([]BuyerRecord, 0, len(orders)+len(failed))
	ordered := make(map[string]bool, len(orders))
	for _, o := range orders {
		recs = append(recs, BuyerRecord{Order: o})
		ordered[o.ReservationID] = true
	}
	for _, f := range failed {
		if !ordered[f.ReservationID] {
			recs = append(recs, BuyerRecord{Failed: f})
		}
	}
	slices.SortStableFunc(recs, func(a, b BuyerRecord) int { return a.writtenAt().Compare(b.writtenAt()) })
	return recs
}

// ReservationID is the id of r's reservation.
func (r BuyerRecord) ReservationID() string {
	if r.Order != nil {
		return r.Order.ReservationID
	}
	return r.Failed.ReservationID
}

func (r BuyerRecord) writtenAt() time.Time {
	if r.Order != nil {
		return r.Order.CreatedAt
	}
	return r.Failed.CreatedAt
}

// PendingUnits is how many of held (the stock store's count of a buyer's
// units) are in no order and no failed order yet, for GET
// …/reservations/mine after a lost answer. Never below 0: a restore, or
// the release of a claim the database refused, leaves the stock store's
// count first.
//
// Every failed order is taken off, kept by the stock store or not: a unit
// on its way may then show late, but a failed claim never shows as on its
// way for good.
func PendingUnits(held int64, recs []BuyerRecord) int64 {
	for _, r := range recs {
		switch {
		case r.Order != nil && r.Order.Status.Holds():
			held -= r.Order.Qty
		case r.Failed != nil:
			held -= r.Failed.Qty
		}
	}
	return max(held, 0)
}
