package seckill

import (
	"strconv"
	"time"
)

// Payment is confirmed by the shop's side (a signed webhook or its service
// token), never by the buyer. A payment after the unit went back does not
// resurrect the order: the buyer is owed a refund.

// Order statuses after a payment that came too late; neither holds units.
const (
	OrderRefundDue OrderStatus = "refund_due" // paid after its unit went back: the buyer is owed a refund
	OrderRefunded  OrderStatus = "refunded"   // that refund was made
)

// Holds reports whether an order of status s holds its units.
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

// Validate names e's first bad field in an EINVALID *Error.
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

// The last three alert (Alerts); only applied and refund_due move the order.
const (
	PaymentApplied   PaymentOutcome = "applied"    // ordered → paid, refund_due → refunded
	PaymentNoted     PaymentOutcome = "noted"      // a failed payment: the buyer may try again
	PaymentRefundDue PaymentOutcome = "refund_due" // paid after the unit went back
	PaymentMismatch  PaymentOutcome = "mismatch"   // not the order's amount or currency
	PaymentConflict  PaymentOutcome = "conflict"   // the order's state does not take it
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
	Outcome  PaymentOutcome
	From, To OrderStatus // To == From when the order does not move
	Detail   string      // why, for the record and the alert
}

// EventType is the order event d's move announces; ok is false for no move.
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

// DecidePayment decides what e does to o, whose sale is priced in currency.
// A payment pays an ordered order even past its deadline, while the sweeper
// has not cancelled it (the money is in, the unit still there).
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

// PaymentRecord is a stored payment event and what it did.
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
	Replayed   bool           `json:"replayed,omitempty"` // a known event id: the first record, nothing changed
}

// MaxPaymentPage is the largest page of a payment list.
const MaxPaymentPage = 1000

// PaymentFilter selects a page of payment records, newest first.
type PaymentFilter struct {
	Outcome PaymentOutcome // "" keeps those that alert
	Limit   int
	Before  string // the previous page's next; "" for the newest
}
