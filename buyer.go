package seckill

import (
	"strings"
	"time"
)

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

// BuyerFailReason is what a buyer is told of why their reservation failed,
// from its failed order's Reason: the code of a refusal the database made
// (the limit, the stock) or of a claim the stock store lost, else "". The
// rest of a Reason (a driver's error, the detail) is the operator's.
func BuyerFailReason(reason string) string {
	for _, r := range buyerFailReasons {
		if strings.HasPrefix(reason, r.prefix) {
			return r.code
		}
	}
	return ""
}

var buyerFailReasons = []struct{ prefix, code string }{
	{ReasonLostInStockStore, ReasonLostInStockStore},
	{ReasonOverLimit, EPURCHASELIMIT},
	{ReasonInsufficientStock, ESOLDOUT},
}

// BuyerFailReasonCodes are the codes BuyerFailReason answers, for the API's
// documentation to list.
func BuyerFailReasonCodes() []string {
	codes := make([]string, len(buyerFailReasons))
	for i, r := range buyerFailReasons {
		codes[i] = r.code
	}
	return codes
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

// BuyerClaim is one of a buyer's claims on a sale as they are told of it.
type BuyerClaim struct {
	ReservationID string // "" for units still on their way to an order
	Status        string // a BuyerStatus
	PayBy         time.Time
}

// Holds reports whether c still holds units for the buyer: on its way,
// awaiting payment (even past the deadline, until it is cancelled) or paid.
// A buyer holding a claim is not offered another purchase by the page.
func (c BuyerClaim) Holds() bool {
	switch c.Status {
	case BuyerPending, string(OrderPlaced), string(OrderPaid):
		return true
	}
	return false
}

// ShownClaim is the claim a buyer's page shows, of their claims on a sale
// (oldest first) and their units still on their way (pending), at now:
// the one they must act on first. ok is false when they have none.
func ShownClaim(claims []BuyerClaim, pending int64, now time.Time) (shown BuyerClaim, ok bool) {
	// rank orders the candidates: to pay (the earliest deadline), on its
	// way, being cancelled, paid, then the latest that ended.
	rank := func(c BuyerClaim) int {
		switch {
		case c.Status == string(OrderPlaced) && now.Before(c.PayBy):
			return 0
		case c.Status == BuyerPending:
			return 1
		case c.Status == string(OrderPlaced):
			return 2
		case c.Status == string(OrderPaid):
			return 3
		}
		return 4
	}
	if pending > 0 {
		claims = append(claims[:len(claims):len(claims)], BuyerClaim{Status: BuyerPending})
	}
	for _, c := range claims {
		switch r, best := rank(c), rank(shown); {
		case !ok, r < best, r == best && r == 0 && c.PayBy.Before(shown.PayBy), r == best && r > 0:
			shown, ok = c, true
		}
	}
	return shown, ok
}
