package seckill

import "fmt"

// PersistSnapshot is what the database holds, when a batch of a sale's
// reservation events is persisted, that decides what becomes of them.
type PersistSnapshot struct {
	Stock int64 // units the sale has left
	Limit int64 // the sale's per-buyer limit
	// Existing names the reservations that already have an order or a
	// failed order.
	Existing map[string]bool
	// Restores maps the reservations whose restore was asked for before
	// their order landed to the request's reason.
	Restores map[string]string
	// Held maps each buyer to the units of their orders of the sale that
	// are not cancelled.
	Held map[string]int64
}

// PersistDecision is what becomes of one event of a batch.
type PersistDecision struct {
	Outcome PersistOutcome
	// Status is the new order's status (PersistCreated): ordered, or
	// cancelled when its restore was asked for first; CancelReason is
	// then the restore's reason.
	Status       OrderStatus
	CancelReason string
	// Reason is the failed order's reason (PersistRejected,
	// PersistOverLimit).
	Reason string
	// Restored marks an event whose reservation has a restore request,
	// which the batch settles.
	Restored bool
}

// PersistPlan is DecidePersist's answer: a decision per event, in order,
// and the units the batch takes from the stock.
type PersistPlan struct {
	Decisions []PersistDecision
	Taken     int64
}

// DecidePersist decides, from the database's snapshot, what becomes of
// each event of a batch of one sale, in order. An event is:
//
//   - a duplicate if its reservation already has an order or a failed
//     order, or appeared earlier in the batch;
//   - rejected if its buyer or qty is invalid;
//   - created cancelled, taking no stock, if its restore was asked for
//     before it landed;
//   - over the limit if the units its buyer holds (with the batch's
//     orders before it) and its qty pass the sale's limit: the database
//     is the last word on the limit, as the stock store may have forgotten
//     what the buyer holds;
//   - created if its qty fits in the stock left after the batch's orders
//     before it;
//   - rejected for insufficient stock otherwise.
//
// The snapshot is not changed.
func DecidePersist(s PersistSnapshot, events []ReservationEvent) PersistPlan {
	plan := PersistPlan{Decisions: make([]PersistDecision, len(events))}
	seen := make(map[string]bool, len(events))
	added := make(map[string]int64) // units the batch gives each buyer
	for i, e := range events {
		d := &plan.Decisions[i]
		if s.Existing[e.ReservationID] || seen[e.ReservationID] {
			d.Outcome = PersistDuplicate
			continue
		}
		seen[e.ReservationID] = true
		restoreReason, restore := s.Restores[e.ReservationID]
		d.Restored = restore
		held := s.Held[e.UserID] + added[e.UserID]
		switch {
		case !ValidUserID(e.UserID):
			d.Outcome, d.Reason = PersistRejected, "invalid reservation event: bad user id"
		case e.Qty < 1 || e.Qty > MaxPurchaseLimit:
			// The upper bound also keeps qty × price (price at most
			// MaxPriceCents) inside int64.
			d.Outcome, d.Reason = PersistRejected, fmt.Sprintf("invalid reservation event: qty %d out of range", e.Qty)
		case restore:
			d.Outcome, d.Status, d.CancelReason = PersistCreated, OrderCancelled, restoreReason
		case held+e.Qty > s.Limit:
			d.Outcome = PersistOverLimit
			d.Reason = fmt.Sprintf("%s: qty %d, buyer holds %d of %d", ReasonOverLimit, e.Qty, held, s.Limit)
		case e.Qty > s.Stock-plan.Taken:
			d.Outcome = PersistRejected
			d.Reason = fmt.Sprintf(ReasonInsufficientStock+": qty %d, %d left", e.Qty, s.Stock-plan.Taken)
		default:
			d.Outcome, d.Status = PersistCreated, OrderPlaced
			plan.Taken += e.Qty
			added[e.UserID] += e.Qty
		}
	}
	return plan
}
