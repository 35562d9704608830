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

// Order is one persisted reservation. There is exactly one order per
// reservation id: the database enforces it with a unique key, which is what
// makes at-least-once delivery from the broker safe.
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
}

// OrderIDOf is the order id of a reservation: derived, so that a redelivered
// event can never mint a second id for the same reservation.
func OrderIDOf(reservationID string) string { return "o-" + reservationID }

// FailedOrder is a reservation that could not become an order: the
// database lacked the stock (Redis and the database disagreed), or every
// attempt to persist it failed. An operator resolves each one (refund or
// re-drive); each also raised an alert.
type FailedOrder struct {
	ReservationID string    `json:"reservation_id"`
	SaleID        string    `json:"sale_id"`
	UserID        string    `json:"user_id"`
	Qty           int64     `json:"qty"`
	Reason        string    `json:"reason"`
	Attempts      int       `json:"attempts"`
	Payload       []byte    `json:"-"` // the raw message, for a re-drive
	CreatedAt     time.Time `json:"created_at"`
	// Resolution is how an operator closed it; nil while it is open.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// FailedOrderState selects failed orders by whether an operator has
// resolved them (ResolveFailedOrder).
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
	// SaleID keeps the failed orders of one sale; "" keeps every sale's
	// (a dead letter may name no sale).
	SaleID string
	// State is FailedOpen, FailedResolved, or FailedAll ("" too).
	State FailedOrderState
	// Limit is the most failed orders in the page (1..MaxFailedOrderPage).
	Limit int
	// Before is the cursor of the previous page ("" for the newest): the
	// next that page came with. It is opaque: the page goes on after the
	// previous page's last row, whatever was recorded meanwhile.
	Before string
}

// FailedOrderCount is how many failed orders one sale has.
type FailedOrderCount struct {
	SaleID   string `json:"sale_id"`
	Open     int64  `json:"open"`
	Resolved int64  `json:"resolved"`
	// Newest is when the sale's newest failed order was recorded.
	Newest time.Time `json:"newest_at"`
}

// PersistOutcome is what happened to one event of a persisted batch.
type PersistOutcome uint8

const (
	PersistCreated   PersistOutcome = iota + 1 // a new order
	PersistDuplicate                           // the order (or failed order) already existed: redelivery
	PersistRejected                            // the database lacked the stock: recorded in failed_orders
	PersistOverLimit                           // the buyer would pass the sale's per-user limit: recorded in failed_orders
)

// Reasons of failed orders that callers and operators branch on. A failed
// order's Reason starts with one of them; what follows is detail.
const (
	// ReasonOverLimit: the database refused an order that would take its
	// buyer past the sale's per-user limit (the stock store had forgotten
	// what the buyer held).
	ReasonOverLimit = "over the purchase limit"
	// ReasonInsufficientStock: the database lacked the stock.
	ReasonInsufficientStock = "insufficient database stock"
	// ReasonLostInStockStore: a claimed reservation the stock store forgot
	// (it lost acknowledged writes) that never reached the database.
	ReasonLostInStockStore = "lost_in_stock_store"
)

// OrderStore persists orders. Implemented per SQL dialect in internal/sqlstore.
type OrderStore interface {
	// PersistReservations turns events of one sale into orders in one
	// transaction: events whose reservation id already has an order (or a
	// failed order) are duplicates; the rest are inserted with status
	// ordered and PayBy = now+payTimeout, and the sale's stock is taken by
	// an optimistic-lock update (stock - n, version + 1, where version and
	// stock >= n); a version conflict re-reads and retries. When the
	// database lacks stock for all of them, events are accepted in order
	// while they fit and the excess is written to failed_orders: the stock
	// never goes negative. outcomes[i] answers events[i].
	PersistReservations(ctx context.Context, saleID string, events []ReservationEvent, now time.Time, payTimeout time.Duration) (outcomes []PersistOutcome, err error)
	// Order returns the order of a reservation; ErrNotFound when none.
	Order(ctx context.Context, reservationID string) (*Order, error)
	// FailedOrder returns the failed order of a reservation; ErrNotFound when none.
	FailedOrder(ctx context.Context, reservationID string) (*FailedOrder, error)
	// RecordFailedOrder stores f unless the reservation already has a
	// failed order or an order (then it is a no-op returning ErrDuplicate):
	// a reservation never ends as both.
	RecordFailedOrder(ctx context.Context, f *FailedOrder) error
	// FailedOrders lists one page of the failed orders f selects, newest
	// first (by CreatedAt, then reservation id, both descending), and the
	// cursor of the next page ("" after the last). A Limit out of range,
	// a State it does not know or a Before it did not return is EINVALID.
	FailedOrders(ctx context.Context, f FailedOrderFilter) (page []*FailedOrder, next string, err error)
	// FailedOrderCounts counts the open and resolved failed orders of
	// every sale that has any, the sale with the newest failed order first.
	FailedOrderCounts(ctx context.Context) ([]FailedOrderCount, error)
	// PayOrder moves an ordered, unexpired order to paid. It is a
	// conditional update, so it and a cancel can never both win: an order
	// in another state, or past PayBy, is an *Error with ESTATECONFLICT.
	PayOrder(ctx context.Context, reservationID string, now time.Time) (*Order, error)
	// CancelOrder moves an ordered order to cancelled (conditional, as
	// PayOrder). Cancelling an already cancelled order returns it with
	// changed=false; a paid one is ESTATECONFLICT.
	CancelOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *Order, changed bool, err error)
	// ExpiredOrders lists up to limit orders still ordered with PayBy <= now.
	ExpiredOrders(ctx context.Context, now time.Time, limit int) ([]*Order, error)
}

// LostClaim is what is known of a reservation id that neither the database
// nor the stock store had when a buyer asked for it (internal/lostclaim).
type LostClaim struct {
	// Known is false when the id was not issued to this buyer: it is
	// answered as someone else's reservation.
	Known bool
	// Qty is the quantity the id carries (0 when it could not).
	Qty int64
	// Order or Failed is set when the claim has settled (it landed
	// meanwhile, or it was recorded lost); neither while it may still be
	// on its way to the database.
	Order  *Order
	Failed *FailedOrder
}
