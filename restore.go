package seckill

import (
	"context"
	"time"
)

// Restoring gives a reservation's units back: to the database first (the
// order cancelled, stock + qty, version + 1), then to Redis (the units back
// in stock and in the buyer's limit). Every step is keyed by the
// reservation id and idempotent, so an operator's restore, a buyer's
// cancel and the payment timeout can race without restoring twice.

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
	// RestoreStateParked: the reservation has no order in the database
	// yet (it is in the outbox or the broker, or never existed). When its
	// order lands it is created cancelled, taking no stock, and the
	// request moves to redis_pending in the same transaction.
	RestoreStateParked RestoreState = "parked"
	// RestoreStateRedisPending: the database step is done; the units are
	// not yet back in Redis. Until they are, they stay unsold: never sold
	// twice.
	RestoreStateRedisPending RestoreState = "redis_pending"
	// RestoreStateDone: both steps are done.
	RestoreStateDone RestoreState = "done"
)

// RestoreRequest is the durable record of one reservation's restore.
type RestoreRequest struct {
	ReservationID string       `json:"reservation_id"`
	SaleID        string       `json:"sale_id"`
	Reason        string       `json:"reason"`
	State         RestoreState `json:"state"`
	Attempts      int          `json:"attempts"`
	LastError     string       `json:"last_error,omitempty"`
	// AlertedAt is when the request was reported as stuck (parked too
	// long); zero while it has not been.
	AlertedAt time.Time `json:"alerted_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RestoreStore is the database side of restoring (internal/sqlstore).
type RestoreStore interface {
	// RestoreOrder runs the database step in one transaction. For an order
	// still ordered: cancel it with reason, add its qty back to the sale's
	// stock (version + 1), and record the request as redis_pending;
	// changed is true. For a reservation that ended in failed_orders (the
	// database never took its stock): record the request as redis_pending
	// only; changed is true, o is nil. For an order already cancelled:
	// changed is false and nothing is written, except that a missing
	// request row is recorded (as redis_pending). A paid order is an
	// *Error with ESTATECONFLICT. No order and no failed order: ErrNotFound,
	// nothing written.
	RestoreOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *Order, changed bool, err error)
	// ParkRestore records a restore of a reservation that has no order yet,
	// as parked. If a request exists already it is returned unchanged.
	// PersistReservations honours parked requests (see RestoreStateParked).
	ParkRestore(ctx context.Context, reservationID, saleID, reason string, now time.Time) (*RestoreRequest, error)
	// RestoreRequest returns one request; ErrNotFound when none.
	RestoreRequest(ctx context.Context, reservationID string) (*RestoreRequest, error)
	// RestoreRequests lists up to limit requests in state, oldest first.
	RestoreRequests(ctx context.Context, state RestoreState, limit int) ([]*RestoreRequest, error)
	// UpdateRestore records an attempt on a request: its new state, the
	// error of the attempt ("" for none) and, if alerted is true and it was
	// not alerted before, AlertedAt = now. Attempts increments.
	UpdateRestore(ctx context.Context, reservationID string, state RestoreState, lastErr string, alerted bool, now time.Time) error
	// RestoreOrders runs RestoreOrder's database step for reservations of
	// one sale in one transaction: results[i] is what RestoreOrder would
	// answer for reservationIDs[i] (ESTATECONFLICT for a paid order,
	// ErrNotFound for one with neither an order nor a failed order, or of
	// another sale), as if they ran one after the other. An error of the
	// whole call writes nothing.
	RestoreOrders(ctx context.Context, saleID string, reservationIDs []string, reason string, now time.Time) ([]OrderRestore, error)
	// FinishRestores records the Redis step of requests as done, as one
	// UpdateRestore(id, RestoreStateDone, lastErr, false, now) each, in one
	// statement. Unknown ids are skipped.
	FinishRestores(ctx context.Context, reservationIDs []string, lastErr string, now time.Time) error
}

// OrderRestore is one answer of RestoreStore.RestoreOrders: what
// RestoreOrder would have returned for that reservation.
type OrderRestore struct {
	Order   *Order
	Changed bool
	Err     error
}

// StockRestorer is the Redis side of restoring (internal/redis).
type StockRestorer interface {
	// RestoreReservation returns an active reservation's units to the
	// sale's stock and to its buyer's limit, and marks it restored, in one
	// script. restored is false when it was restored already. ErrNotFound
	// when the stock store has no record of the reservation.
	RestoreReservation(ctx context.Context, reservationID string) (restored bool, err error)
	// RestoreReservations does RestoreReservation for reservations of one
	// sale, in order, in one script call: results[i] answers
	// reservationIDs[i]. An error of the whole call changed nothing.
	RestoreReservations(ctx context.Context, saleID string, reservationIDs []string) ([]ReservationRestore, error)
	// PublishRestocked tells every API node that a sale has stock again,
	// so each clears its local sold-out flag.
	PublishRestocked(ctx context.Context, saleID string) error
	// SubscribeRestocked calls fn with the sale id of every restock
	// announcement until ctx ends, resubscribing after a lost connection.
	SubscribeRestocked(ctx context.Context, fn func(saleID string)) error
}

// ReservationRestore is one answer of StockRestorer.RestoreReservations.
type ReservationRestore struct {
	Restored bool
	Err      error
}
