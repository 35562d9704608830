package seckill

import (
	"context"
	"strconv"
	"time"
)

// Payment is confirmed by the shop's side, never by the buyer: the shop's
// payment provider posts a signed webhook (or the shop's server calls the
// admin API with its service token), and DecidePayment says what the
// event does to the order. A payment that arrives after the order's unit
// went back to the sale does not resurrect the order: the buyer is owed a
// refund, and an operator sees it.

// Order statuses after a payment that came too late. Neither holds the
// order's units: they went back to the sale when the order was cancelled.
const (
	OrderRefundDue OrderStatus = "refund_due" // paid after its unit went back: the buyer is owed a refund
	OrderRefunded  OrderStatus = "refunded"   // that refund was made
)

// Holds reports whether an order of status s holds its units (ordered or
// paid); a cancelled, refund_due or refunded order holds none.
func (s OrderStatus) Holds() bool { return s == OrderPlaced || s == OrderPaid }

// Known reports whether s is an order status this version knows.
func (s OrderStatus) Known() bool {
	switch s {
	case OrderPlaced, OrderPaid, OrderCancelled, OrderRefundDue, OrderRefunded:
		return true
	}
	return false
}

// PaymentEventType is what a payment event says happened.
type PaymentEventType string

const (
	PaymentSucceeded PaymentEventType = "payment.succeeded"
	PaymentFailed    PaymentEventType = "payment.failed"
	RefundSucceeded  PaymentEventType = "refund.succeeded"
)

// MaxPaymentEventIDBytes bounds a payment event's id.
const MaxPaymentEventIDBytes = 128

// PaymentEvent is what the shop's side says about one order's money. ID
// is the provider's event id: the same id again is the same event, and has
// no second effect.
type PaymentEvent struct {
	ID            string           `json:"id"`
	Type          PaymentEventType `json:"type"`
	ReservationID string           `json:"reservation_id"`
	AmountCents   int64            `json:"amount_cents"`
	Currency      string           `json:"currency"`
}

// Validate checks e's fields, as an EINVALID *Error naming the first bad
// one.
func (e PaymentEvent) Validate() error {
	switch {
	case e.ID == "" || len(e.ID) > MaxPaymentEventIDBytes || !printableASCII(e.ID):
		return Errorf(EINVALID, "id must be 1-%d printable ASCII characters.", MaxPaymentEventIDBytes)
	case e.Type != PaymentSucceeded && e.Type != PaymentFailed && e.Type != RefundSucceeded:
		return Errorf(EINVALID, "type must be %s, %s or %s.", PaymentSucceeded, PaymentFailed, RefundSucceeded)
	case !validReservationID(e.ReservationID):
		return Errorf(EINVALID, "reservation_id must name a reservation.")
	case e.AmountCents < 0:
		return Errorf(EINVALID, "amount_cents must not be negative.")
	case !ValidCurrency(e.Currency):
		return Errorf(EINVALID, "currency must be an ISO 4217 code in capitals, such as EUR.")
	}
	return nil
}

func validReservationID(id string) bool {
	_, ok := SaleIDOfReservation(id)
	return ok
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// PaymentOutcome is what a payment event did.
type PaymentOutcome string

const (
	// PaymentApplied: the order moved (ordered → paid, refund_due →
	// refunded).
	PaymentApplied PaymentOutcome = "applied"
	// PaymentNoted: recorded; the order does not move (a failed payment:
	// the buyer may try again until the deadline).
	PaymentNoted PaymentOutcome = "noted"
	// PaymentRefundDue: paid after the order was cancelled and its unit
	// went back; the order is now refund_due. Alerted.
	PaymentRefundDue PaymentOutcome = "refund_due"
	// PaymentMismatch: the amount or currency is not the order's; the
	// order does not move. Alerted.
	PaymentMismatch PaymentOutcome = "mismatch"
	// PaymentConflict: the order's state does not take this event (a
	// second payment of a paid order, a refund of an order not owed one);
	// the order does not move. Alerted.
	PaymentConflict PaymentOutcome = "conflict"
)

// PaymentOutcomes lists every outcome, for filters and metrics.
func PaymentOutcomes() []PaymentOutcome {
	return []PaymentOutcome{PaymentApplied, PaymentNoted, PaymentRefundDue, PaymentMismatch, PaymentConflict}
}

// Alerts reports whether an operator must look at an event of outcome o.
func (o PaymentOutcome) Alerts() bool {
	return o == PaymentRefundDue || o == PaymentMismatch || o == PaymentConflict
}

// PaymentDecision is what one payment event does to its order.
type PaymentDecision struct {
	Outcome PaymentOutcome
	// From is the order's status as read; To the status it moves to
	// (To == From when it does not move).
	From, To OrderStatus
	// Detail says why, for the record and the alert.
	Detail string
}

// EventType is the order event a move to d.To announces (order.paid,
// order.refund_due, order.refunded); ok is false when the decision does
// not move the order.
func (d PaymentDecision) EventType() (typ OrderEventType, ok bool) {
	if !d.Moves() {
		return "", false
	}
	switch d.To {
	case OrderPaid:
		return EventOrderPaid, true
	case OrderRefundDue:
		return EventOrderRefundDue, true
	case OrderRefunded:
		return EventOrderRefunded, true
	}
	return "", false
}

// Moves reports whether the decision changes the order's status.
func (d PaymentDecision) Moves() bool { return d.To != d.From }

// DecidePayment decides what event e does to order o, whose sale is
// priced in currency. An amount or currency other than the order's is a
// mismatch whatever the type. A payment of an order still awaiting one
// pays it, even past its deadline while its unit is still held (the
// sweeper has not cancelled it: the money is in and the unit is there);
// of a cancelled order (its unit went back) makes it refund_due. A refund
// settles a refund_due order. Anything else leaves the order as it is.
func DecidePayment(o *Order, currency string, e PaymentEvent, now time.Time) PaymentDecision {
	d := PaymentDecision{From: o.Status, To: o.Status}
	switch {
	case e.AmountCents != o.AmountCents:
		d.Outcome, d.Detail = PaymentMismatch, "amount "+centsText(e.AmountCents)+" is not the order's "+centsText(o.AmountCents)
		return d
	case e.Currency != currency:
		d.Outcome, d.Detail = PaymentMismatch, "currency "+e.Currency+" is not the order's "+orNone(currency)
		return d
	}
	switch e.Type {
	case PaymentSucceeded:
		switch o.Status {
		case OrderPlaced:
			d.Outcome, d.To, d.Detail = PaymentApplied, OrderPaid, "paid"
			if !now.Before(o.PayBy) {
				d.Detail = "paid after the deadline, before the unit went back"
			}
		case OrderCancelled:
			d.Outcome, d.To, d.Detail = PaymentRefundDue, OrderRefundDue, "paid after the order was cancelled and its unit went back: refund the buyer"
		case OrderPaid:
			d.Outcome, d.Detail = PaymentConflict, "the order was already paid by another event: a second charge?"
		default:
			d.Outcome, d.Detail = PaymentConflict, "a payment of an order that is "+string(o.Status)+": refund the buyer"
		}
	case PaymentFailed:
		d.Outcome, d.Detail = PaymentNoted, "payment failed; the order stays "+string(o.Status)
	case RefundSucceeded:
		switch o.Status {
		case OrderRefundDue:
			d.Outcome, d.To, d.Detail = PaymentApplied, OrderRefunded, "refunded"
		default:
			d.Outcome, d.Detail = PaymentConflict, "a refund of an order that is "+string(o.Status)+", not refund_due"
		}
	default:
		d.Outcome, d.Detail = PaymentConflict, "unknown event type "+string(e.Type)
	}
	return d
}

func centsText(c int64) string { return strconv.FormatInt(c, 10) + " cents" }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// PaymentSource says which door a payment event came through.
type PaymentSource string

const (
	SourceWebhook PaymentSource = "webhook" // POST /webhooks/v1/payments, signed
	SourceService PaymentSource = "service" // POST /admin/v1/orders/{id}/payments, service token
)

// PaymentRecord is a stored payment event and what it did. An operator
// lists those that alerted (mismatch, conflict, refund_due).
type PaymentRecord struct {
	PaymentEvent
	OrderID    string         `json:"order_id"`
	SaleID     string         `json:"sale_id"`
	Source     PaymentSource  `json:"source"`
	Outcome    PaymentOutcome `json:"outcome"`
	FromStatus OrderStatus    `json:"from_status"`
	ToStatus   OrderStatus    `json:"to_status"`
	Detail     string         `json:"detail"`
	ReceivedAt time.Time      `json:"received_at"`
	// Replayed is set on the answer to an event id already stored: this
	// is the first delivery's record, and nothing changed.
	Replayed bool `json:"replayed,omitempty"`
}

// MaxPaymentPage is the largest page of a payment list.
const MaxPaymentPage = 1000

// PaymentFilter selects a page of payment records, newest first.
type PaymentFilter struct {
	// Outcome keeps one outcome; "" keeps those that alert.
	Outcome PaymentOutcome
	Limit   int
	// Before is the next of the previous page ("" for the newest).
	Before string
}

// PaymentStore applies and lists payment events (internal/sqlstore).
type PaymentStore interface {
	// ApplyPayment stores e and applies DecidePayment's decision to its
	// order in one transaction (a conditional update: a concurrent
	// cancel and this payment never both win). An event id already
	// stored returns that record with Replayed set and changes nothing;
	// the same id with other fields is EKEYREUSED. No order for the
	// reservation: ErrNotFound, nothing stored (the provider retries).
	ApplyPayment(ctx context.Context, e PaymentEvent, source PaymentSource, now time.Time) (*PaymentRecord, error)
	// Payments lists one page of records f selects and the next cursor
	// ("" after the last).
	Payments(ctx context.Context, f PaymentFilter) ([]*PaymentRecord, string, error)
}
