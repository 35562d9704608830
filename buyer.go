package seckill

import "time"

// The statuses a buyer is told of a reservation that has no order: its
// claim is on its way to the database (or may still land), or it failed.
// A reservation with an order shows the order's status.
const (
	BuyerPending = "pending"
	BuyerFailed  = "failed"
)

// BuyerStatus is what a buyer is told of their reservation, from the most
// settled place that has it: its order's status, else failed (a failed
// order), else pending. ok is false for an order of a status this version
// does not know: a bug or a bad row, for an operator, never the buyer.
func BuyerStatus(o *Order, f *FailedOrder) (status string, ok bool) {
	switch {
	case o != nil:
		return string(o.Status), o.Status.Known()
	case f != nil:
		return BuyerFailed, true
	}
	return BuyerPending, true
}

// CanPay reports whether the buyer may still pay o at now: it awaits its
// payment and its deadline has not come (PayBy is the first instant too
// late). The order store's conditional update applies the same rule.
func (o *Order) CanPay(now time.Time) bool {
	return o.Status == OrderPlaced && now.Before(o.PayBy)
}
