package seckill

import (
	"context"
	"time"
)

// OrderStatus is the life of an order in the database.
type OrderStatus string

const (
	OrderPlaced    OrderStatus = "ordered"   // persisted, awaiting payment
	OrderPaid      OrderStatus = "paid"      // paid before its deadline
	OrderCancelled OrderStatus = "cancelled" // cancelled by the buyer, an operator or the pay timeout
)

// Order is one persisted reservation: one per reservation id, by a unique
// key, which makes at-least-once delivery safe.
type Order struct {
	ID            string      `json:"order_id"`
	ReservationID string      `json:"reservation_id"`
	SaleID        string      `json:"sale_id"`
	UserID        string      `json:"user_id"`
	Qty           int64       `json:"qty"`
	AmountCents   int64       `json:"amount_cents"`
	Status        OrderStatus `json:"status"`
	PayBy         time.Time   `json:"pay_by"`
	ReservedAt    time.Time   `json:"reserved_at"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	CancelReason  string      `json:"cancel_reason,omitempty"`
	// KeyDigest is the IdempotencyDigest of the key its reservation was
	// made under, "" without one. Written with the order, read only by
	// OrderOfKey: no answer shows it.
	KeyDigest string `json:"-"`
}

// OrderIDOf is the order id of a reservation: derived, so that a redelivered
// event can never mint a second id for the same reservation.
func OrderIDOf(reservationID string) string { return "o-" + reservationID }

// FailedOrder is a reservation that could not become an order (no database
// stock, or every attempt failed); each alerts, and an operator resolves it.
type FailedOrder struct {
	ReservationID string      `json:"reservation_id"`
	SaleID        string      `json:"sale_id"`
	UserID        string      `json:"user_id"`
	Qty           int64       `json:"qty"`
	Reason        string      `json:"reason"`
	Attempts      int         `json:"attempts"`
	Payload       []byte      `json:"-"` // the raw message, for a re-drive
	CreatedAt     time.Time   `json:"created_at"`
	Resolution    *Resolution `json:"resolution,omitempty"` // nil while open
}

// FailedOrderState selects failed orders by whether they are resolved.
type FailedOrderState string

const (
	FailedOpen     FailedOrderState = "open"     // no resolution yet
	FailedResolved FailedOrderState = "resolved" // re-driven or refunded
	FailedAll      FailedOrderState = "all"      // either; so is ""
)

// MaxFailedOrderPage is the largest page of a failed-order list.
const MaxFailedOrderPage = 1000

// FailedOrderFilter selects a page of failed orders.
type FailedOrderFilter struct {
	SaleID string // "" for every sale's (a dead letter may name none)
	State  FailedOrderState
	Limit  int    // 1..MaxFailedOrderPage
	Before string // the previous page's opaque next; "" for the newest
}

// FailedOrderCount is how many failed orders one sale has.
type FailedOrderCount struct {
	SaleID   string    `json:"sale_id"`
	Open     int64     `json:"open"`
	Resolved int64     `json:"resolved"`
	Newest   time.Time `json:"newest_at"`
}

// PersistOutcome is what happened to one event of a persisted batch.
type PersistOutcome uint8

const (
	PersistCreated   PersistOutcome = iota + 1 // a new order
	PersistDuplicate                           // the order (or failed order) already existed: redelivery
	PersistRejected                            // the database lacked the stock: recorded in failed_orders
	PersistOverLimit                           // the buyer would pass the sale's per-user limit: recorded in failed_orders
)

// Reasons a failed order's Reason starts with; what follows is detail.
const (
	ReasonOverLimit         = "over the purchase limit" // the stock store forgot what the buyer held
	ReasonInsufficientStock = "insufficient database stock"
	ReasonLostInStockStore  = "lost_in_stock_store" // a claim the stock store forgot before it landed
)

// OrderStore persists orders (internal/sqlstore).
type OrderStore interface {
	// PersistReservations applies DecidePersist to one sale's events in one
	// transaction, taking stock by an optimistic-lock update (docs/design.md
	// §4). outcomes[i] answers events[i].
	PersistReservations(ctx context.Context, saleID string, events []ReservationEvent, now time.Time, payTimeout time.Duration) (outcomes []PersistOutcome, err error)
	Order(ctx context.Context, reservationID string) (*Order, error)
	FailedOrder(ctx context.Context, reservationID string) (*FailedOrder, error)
	// RecordFailedOrder is ErrDuplicate when the reservation has an order or
	// a failed order already: it never ends as both.
	RecordFailedOrder(ctx context.Context, f *FailedOrder) error
	// FailedOrders lists a page newest first, and the next cursor ("" after
	// the last); a bad filter is EINVALID.
	FailedOrders(ctx context.Context, f FailedOrderFilter) (page []*FailedOrder, next string, err error)
	// FailedOrderCounts counts by sale, the newest failed order's first.
	FailedOrderCounts(ctx context.Context) ([]FailedOrderCount, error)
	// PayOrder and CancelOrder are conditional updates, so a payment and a
	// cancel never both win; PayOrder refuses as Order.PayRefusal says.
	PayOrder(ctx context.Context, reservationID string, now time.Time) (*Order, error)
	// CancelOrder of a cancelled order returns it unchanged; paid is
	// ESTATECONFLICT.
	CancelOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *Order, changed bool, err error)
	// ExpiredOrders lists up to limit orders still ordered with PayBy <= now.
	ExpiredOrders(ctx context.Context, now time.Time, limit int) ([]*Order, error)
}

// LostClaim is what is known of a reservation id that neither store had
// when its buyer asked (internal/lostclaim).
type LostClaim struct {
	Known bool  // false: not issued to this buyer, answered as someone else's
	Qty   int64 // 0 when unknown
	// Order or Failed is set once the claim settled; neither while it may
	// still land.
	Order  *Order
	Failed *FailedOrder
}
