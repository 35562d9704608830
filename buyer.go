package seckill

import "time"

// The statuses of a reservation with no order; one with an order shows its.
const (
	BuyerPending = "pending"
	BuyerFailed  = "failed"
)

// BuyerStatus is what a buyer is told, from the most settled place: the
// order's status, failed, or pending. ok is false for an unknown status: a
// bug for an operator, never shown to the buyer.
func BuyerStatus(o *Order, f *FailedOrder) (status string, ok bool) {
	switch {
	case o != nil:
		return string(o.Status), o.Status.Known()
	case f != nil:
		return BuyerFailed, true
	}
	return BuyerPending, true
}

// CanPay reports whether the buyer may still pay o at now (PayBy is the
// first instant too late); the store's conditional update is the same rule.
func (o *Order) CanPay(now time.Time) bool { return o.Status == OrderPlaced && now.Before(o.PayBy) }

// PayRefusal says why the buyer may not pay o at now (CanPay is false), as
// an ESTATECONFLICT *Error; nil when they may.
func (o *Order) PayRefusal(now time.Time) error {
	switch {
	case o.CanPay(now):
		return nil
	case o.Status == OrderPaid:
		return Errorf(ESTATECONFLICT, "order is already paid")
	case o.Status == OrderCancelled:
		return Errorf(ESTATECONFLICT, "order is cancelled")
	case !now.Before(o.PayBy):
		return Errorf(ESTATECONFLICT, "payment deadline %s has passed", o.PayBy.Format(time.RFC3339))
	}
	return Errorf(ESTATECONFLICT, "order is %s", o.Status)
}
