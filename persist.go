package seckill

import "fmt"

// PersistSnapshot is what the database holds that decides a batch's fate.
type PersistSnapshot struct {
	Stock    int64             // units the sale has left
	Limit    int64             // the sale's per-buyer limit
	Existing map[string]bool   // reservations with an order or failed order
	Restores map[string]string // restores asked before the order landed: reason
	Held     map[string]int64  // each buyer's units in orders not cancelled
}

// PersistDecision is what becomes of one event of a batch.
type PersistDecision struct {
	Outcome PersistOutcome
	// Status of a created order: cancelled (with CancelReason) when its
	// restore came first.
	Status       OrderStatus
	CancelReason string
	Reason       string // a failed order's reason
	Restored     bool   // the batch settles its restore request
}

// PersistPlan is a decision per event, in order, and the units taken.
type PersistPlan struct {
	Decisions []PersistDecision
	Taken     int64
}

// DecidePersist decides each event of one sale's batch, in order: duplicate,
// invalid, cancelled by an earlier restore, over the limit, created if it
// fits the stock left, else rejected. The database has the last word on the
// limit, as the stock store may have forgotten what a buyer holds.
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
