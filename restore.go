package seckill

import (
	"context"
	"time"
)

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

// RestoreStore is the database side of restoring (internal/sqlstore).
type RestoreStore interface {
	// RestoreOrder runs the database step in one transaction: an ordered
	// order is cancelled and its qty goes back to the sale (changed); a
	// failed order only records the request (changed, o nil); a cancelled
	// one changes nothing. Paid: ESTATECONFLICT; neither: ErrNotFound.
	RestoreOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *Order, changed bool, err error)
	// ParkRestore records a restore of a reservation with no order yet; an
	// existing request is returned unchanged.
	ParkRestore(ctx context.Context, reservationID, saleID, reason string, now time.Time) (*RestoreRequest, error)
	RestoreRequest(ctx context.Context, reservationID string) (*RestoreRequest, error)
	// RestoreRequests lists up to limit requests in state, oldest first.
	RestoreRequests(ctx context.Context, state RestoreState, limit int) ([]*RestoreRequest, error)
	// UpdateRestore records an attempt: Attempts+1, the new state and error,
	// and AlertedAt = now the first time alerted is true.
	UpdateRestore(ctx context.Context, reservationID string, state RestoreState, lastErr string, alerted bool, now time.Time) error
	// RestoreOrders is RestoreOrder for reservations of one sale, in order,
	// in one transaction; an error of the whole call writes nothing.
	RestoreOrders(ctx context.Context, saleID string, reservationIDs []string, reason string, now time.Time) ([]OrderRestore, error)
	// FinishRestores marks requests done in one statement; unknown ids are
	// skipped.
	FinishRestores(ctx context.Context, reservationIDs []string, lastErr string, now time.Time) error
}

// OrderRestore is one answer of RestoreStore.RestoreOrders.
type OrderRestore struct {
	Order   *Order
	Changed bool
	Err     error
}

// StockRestorer is the Redis side of restoring (internal/redis).
type StockRestorer interface {
	// RestoreReservation gives an active reservation's units back to the
	// stock and the buyer's limit in one script; false when already done.
	RestoreReservation(ctx context.Context, reservationID string) (restored bool, err error)
	// RestoreReservations is RestoreReservation for one sale's
	// reservations, in one script call.
	RestoreReservations(ctx context.Context, saleID string, reservationIDs []string) ([]ReservationRestore, error)
	// PublishRestocked tells every API node to clear its sold-out flag.
	PublishRestocked(ctx context.Context, saleID string) error
	SubscribeRestocked(ctx context.Context, fn func(saleID string)) error
}

// ReservationRestore is one answer of StockRestorer.RestoreReservations.
type ReservationRestore struct {
	Restored bool
	Err      error
}
