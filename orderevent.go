package seckill

import (
	"strings"
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

// Word is the type's last word (created, paid, cancelled, failed,
// refund_due, refunded): what its events' ids end in, and the brokers'
// subject or routing key of its events.
func (t OrderEventType) Word() string {
	s := string(t)
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// OrderEventID is "<reservation id>.<the type's Word>".
func OrderEventID(typ OrderEventType, reservationID string) string {
	return reservationID + "." + typ.Word()
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
