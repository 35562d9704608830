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

// OrderEventTypes lists every event type, in the order an order's events
// can come.
var OrderEventTypes = []OrderEventType{
	EventOrderCreated, EventOrderFailed, EventOrderPaid, EventOrderCancelled, EventOrderRefundDue, EventOrderRefunded,
}

// OrderEvent is one change of one order, as the shop receives it. It is
// written in the same database transaction as the change (the event
// outbox), then delivered at least once; a receiver deduplicates on ID.
type OrderEvent struct {
	// ID is derived from the reservation and the type (OrderEventID): an
	// order has at most one event of each type, and a redelivery carries
	// the same id.
	ID            string         `json:"id"`
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

// OrderEventID is the id of an order's event of type typ: the reservation
// id and the type's last word ("<reservation>.created").
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

// FailedOrderEvent is the order.failed event of f, whose amount is
// amountCents (qty × the sale's price; -1 when the caller does not know
// the price and the store is to work it out).
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
	// Seq orders the outbox: an order's events are delivered by Seq.
	Seq       int64         `json:"seq"`
	Event     OrderEvent    `json:"event"`
	State     DeliveryState `json:"state"`
	Attempts  int           `json:"attempts"`
	LastError string        `json:"last_error,omitempty"`
	NextAt    time.Time     `json:"next_at"`
	// RetryFrom starts the window of attempts: the event's At, or when an
	// operator redelivered it.
	RetryFrom   time.Time `json:"retry_from"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	DeadAt      time.Time `json:"dead_at,omitzero"`
}

// OutboxStats is how the event outbox stands.
type OutboxStats struct {
	// Pending events not delivered yet, and when the oldest of them
	// happened (zero when none): the shop is that far behind.
	Pending       int64     `json:"pending"`
	OldestPending time.Time `json:"oldest_pending_at,omitzero"`
	// Dead-lettered events not redelivered.
	Dead int64 `json:"dead"`
}

// DeliveryPolicy says when a failed delivery is tried again and when it
// is given up.
type DeliveryPolicy struct {
	// FirstBackoff is the pause after the first failed attempt; each
	// later pause doubles, up to MaxBackoff.
	FirstBackoff time.Duration
	MaxBackoff   time.Duration
	// RetryFor is how long after the event happened attempts go on; the
	// first failure after that dead-letters it.
	RetryFor time.Duration
}

// DefaultDeliveryPolicy retries for a day, from one second apart up to ten
// minutes apart.
var DefaultDeliveryPolicy = DeliveryPolicy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Minute, RetryFor: 24 * time.Hour}

// Backoff is the pause after the attempts-th failed attempt (1, 2, …):
// FirstBackoff doubled attempts-1 times, at most MaxBackoff, less up to
// a fifth of it by jitter (in [0, 1)), so that events that failed together
// spread out.
func (p DeliveryPolicy) Backoff(attempts int, jitter float64) time.Duration {
	d := p.FirstBackoff
	for i := 1; i < attempts && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d - time.Duration(float64(d)*0.2*min(max(jitter, 0), 1))
}

// AfterFailure decides what follows a failed attempt, the attempts-th (1,
// 2, …) of an event whose attempts began at from (when it happened, or
// when an operator redelivered it): the time of the next attempt, or dead
// when that would come more than RetryFor after from (then next is zero).
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

// EventOutbox is the database side of order-event delivery: the events
// written by the order changes, claimed by one deliverer at a time.
// Implemented in internal/sqlstore.
type EventOutbox interface {
	// Claim leases up to limit events that are due (pending, next attempt
	// at or before now, no live lease) and are each the first undelivered
	// event of their order, to owner until now+lease. No other owner
	// claims them until then.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*EventDelivery, error)
	// Delivered records the events of seqs as delivered at now.
	Delivered(ctx context.Context, seqs []int64, now time.Time) error
	// Failed records a failed attempt of the event of seq, leased by
	// owner: its next attempt at next, or dead-lettered when dead. An
	// event owner no longer leases is left alone (false).
	Failed(ctx context.Context, seq int64, owner, lastErr string, next time.Time, dead bool, now time.Time) (bool, error)
}
