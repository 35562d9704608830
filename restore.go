package seckill

import "time"

// Restoring gives a reservation's units back, to the database first, then to
// Redis. Every step is keyed by the reservation id and idempotent, so an
// operator, a buyer's cancel and the pay timeout never restore twice
// (docs/design.md §5).

// Reasons recorded on orders cancelled by the engine itself; an operator's
// restore records the operator's own words.
const (
	ReasonBuyerCancel = "cancelled by buyer"
	ReasonPayTimeout  = "payment timeout"
)

// RestoreResult is the answer to a restore request.
type RestoreResult string

const (
	Restored        RestoreResult = "restored"         // this request gave the units back
	AlreadyRestored RestoreResult = "already_restored" // an earlier one did; nothing changed
	RestoreParked   RestoreResult = "parked"           // no order yet: applied when it lands
)

// RestoreState is where a restore request stands.
type RestoreState string

const (
	// RestoreStateParked: no order yet. It lands cancelled, taking no stock,
	// and the request moves to redis_pending in the same transaction.
	RestoreStateParked RestoreState = "parked"
	// RestoreStateRedisPending: the database step is done; until Redis's is,
	// the units stay unsold, never sold twice.
	RestoreStateRedisPending RestoreState = "redis_pending"
	RestoreStateDone         RestoreState = "done"
)

// RestoreRequest is the durable record of one reservation's restore.
type RestoreRequest struct {
	ReservationID string       `json:"reservation_id"`
	SaleID        string       `json:"sale_id"`
	Reason        string       `json:"reason"`
	State         RestoreState `json:"state"`
	Attempts      int          `json:"attempts"`
	LastError     string       `json:"last_error,omitempty"`
	// AlertedAt is when it was reported stuck (parked too long).
	AlertedAt time.Time `json:"alerted_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// OrderRestore is one answer of a batch restore in the database (restore.Store).
type OrderRestore struct {
	Order   *Order
	Changed bool
	Err     error
}

// ReservationRestore is one answer of a batch restore in Redis (restore.Stock).
type ReservationRestore struct {
	Restored bool
	Err      error
}
