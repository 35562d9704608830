package seckill

import (
	"context"
	"time"
)

// OrderEventType names a change of an order that the shop hears of.
type OrderEventType string

const (
	EventOrderCreated   OrderEventType = "order.created"    // the order landed in the database
	EventOrderPaid      OrderEventType = "order.paid"       // the payment provider confirmed it
	EventOrderCancelled OrderEventType = "order.cancelled"  // cancelled (timeout, buyer, operator); its unit went back
	EventOrderFailed    OrderEventType = "order.failed"     // the reservation could not become an order
	EventOrderRefundDue OrderEventType = "order.refund_due" // paid after it was cancelled: the buyer is owed a refund
	EventOrderRefunded  OrderEventType = "order.refunded"   // the refund went through
)

// OrderEventTypes lists every type in the order an order's events can come.
var OrderEventTypes = []OrderEventType{
	EventOrderCreated, EventOrderFailed, EventOrderPaid, EventOrderCancelled, EventOrderRefundDue, EventOrderRefunded,
}

// OrderEvent is one change of one order as the shop receives it: written in
// the change's transaction, delivered at least once, deduplicated on ID.
type OrderEvent struct {
	ID            string         `json:"id"` // OrderEventID: one per order and type
	Type          OrderEventType `json:"type"`
	OrderID       string         `json:"order_id"`
	ReservationID string         `json:"reservation_id"`
	SaleID        string         `json:"sale_id"`
	UserID        string         `json:"user_id"`
	Qty           int64          `json:"qty"`
	AmountCents   int64          `json:"amount_cents"`
	Currency      string         `json:"currency"`
	At            time.Time      `json:"at"`
}

// OrderEventID is "<reservation id>.<the type's last word>".
func OrderEventID(typ OrderEventType, reservationID string) string {
	s := string(typ)
	if len(s) > len("order.") {
		s = s[len("order."):]
	}
	return reservationID + "." + s
}

// NewOrderEvent is the event of type typ of order o, at at.
func NewOrderEvent(typ OrderEventType, o *Order, at time.Time) OrderEvent {
	return OrderEvent{
		ID:            OrderEventID(typ, o.ReservationID),
		Type:          typ,
		OrderID:       o.ID,
		ReservationID: o.ReservationID,
		SaleID:        o.SaleID,
		UserID:        o.UserID,
		Qty:           o.Qty,
		AmountCents:   o.AmountCents,
		At:            at,
	}
}

// FailedOrderEvent is f's order.failed event; amountCents -1 lets the store
// work it out from the sale's price.
func FailedOrderEvent(f *FailedOrder, amountCents int64, at time.Time) OrderEvent {
	return OrderEvent{
		ID:            OrderEventID(EventOrderFailed, f.ReservationID),
		Type:          EventOrderFailed,
		OrderID:       OrderIDOf(f.ReservationID),
		ReservationID: f.ReservationID,
		SaleID:        f.SaleID,
		UserID:        f.UserID,
		Qty:           f.Qty,
		AmountCents:   amountCents,
		At:            at,
	}
}

// DeliveryState is where an event's delivery stands.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"   // not delivered yet; attempts go on
	DeliveryDelivered DeliveryState = "delivered" // the receiver answered 2xx
	DeliveryDead      DeliveryState = "dead"      // every attempt failed: dead-lettered until an operator redelivers it
)

// EventDelivery is an outbox row: an event and how its delivery stands.
type EventDelivery struct {
	Seq         int64         `json:"seq"` // an order's events go out by Seq
	Event       OrderEvent    `json:"event"`
	State       DeliveryState `json:"state"`
	Attempts    int           `json:"attempts"`
	LastError   string        `json:"last_error,omitempty"`
	NextAt      time.Time     `json:"next_at"`
	RetryFrom   time.Time     `json:"retry_from"` // At, or an operator's redelivery
	DeliveredAt time.Time     `json:"delivered_at,omitzero"`
	DeadAt      time.Time     `json:"dead_at,omitzero"`
}

// OutboxStats is how the event outbox stands.
type OutboxStats struct {
	Pending       int64     `json:"pending"`
	OldestPending time.Time `json:"oldest_pending_at,omitzero"` // the shop is that far behind
	Dead          int64     `json:"dead"`
}

// DeliveryPolicy says when a failed delivery is tried again and when it
// is given up.
type DeliveryPolicy struct {
	// FirstBackoff doubles after each failure, up to MaxBackoff.
	FirstBackoff time.Duration
	MaxBackoff   time.Duration
	RetryFor     time.Duration // from the event; the next failure dead-letters it
}

// DefaultDeliveryPolicy retries for a day, from one second apart up to ten
// minutes apart.
var DefaultDeliveryPolicy = DeliveryPolicy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Minute, RetryFor: 24 * time.Hour}

// Backoff is the pause after the attempts-th failure, less up to a fifth by
// jitter in [0, 1), so events that failed together spread out.
func (p DeliveryPolicy) Backoff(attempts int, jitter float64) time.Duration {
	d := p.FirstBackoff
	for i := 1; i < attempts && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d - time.Duration(float64(d)*0.2*min(max(jitter, 0), 1))
}

// AfterFailure is the next attempt after the attempts-th failure, or dead
// when it would come more than RetryFor after from.
func (p DeliveryPolicy) AfterFailure(attempts int, from, now time.Time, jitter float64) (next time.Time, dead bool) {
	next = now.Add(p.Backoff(attempts, jitter))
	if next.Sub(from) > p.RetryFor {
		return time.Time{}, true
	}
	return next, false
}

// DeliveredStatus reports whether an HTTP status means the receiver took
// the event: any 2xx. Anything else, redirects included, is tried again.
func DeliveredStatus(code int) bool { return code >= 200 && code <= 299 }

// EventOutbox is the database side of order-event delivery (internal/sqlstore).
type EventOutbox interface {
	// Claim leases to owner until now+lease up to limit due events, each the
	// first undelivered one of its order.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*EventDelivery, error)
	Delivered(ctx context.Context, seqs []int64, now time.Time) error
	// Failed records a failed attempt; false when owner lost the lease.
	Failed(ctx context.Context, seq int64, owner, lastErr string, next time.Time, dead bool, now time.Time) (bool, error)
}
