package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// Payments is the payment store of a DB (httpapi.PaymentStore): payment
// events, stored once per event id, and the order moves they make. What an
// event does is seckill.DecidePayment's call; the SQL here only reads,
// records and makes the conditional update.
type Payments struct {
	st *orderDB
	// currency is the deployment's currency, for sales made before sales
	// had one (their currency column is '').
	currency string
}

// NewPayments returns the payment store of the order store's database.
// defaultCurrency stands for the currency of sales stored without one.
func NewPayments(orders *OrderStore, defaultCurrency string) *Payments {
	return &Payments{st: orders.orderDB, currency: defaultCurrency}
}

var errPaymentKeyReused = seckill.Errorf(seckill.EKEYREUSED,
	"This event id was received before with other fields; an event id names one event.")

// ApplyPayment stores e and makes its decision's order move in one
// transaction, as httpapi.PaymentStore says. The move is conditional on
// the status the decision was made from: if a concurrent cancel (the
// payment timeout) or payment moved the order first, the transaction is
// tried again and decides on the new status. A concurrent delivery of
// the same event id loses on the primary key, is tried again and answers
// as a replay.
func (p *Payments) ApplyPayment(ctx context.Context, e seckill.PaymentEvent, source seckill.PaymentSource, now time.Time) (*seckill.PaymentRecord, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("apply payment: %w", err)
	}
	st := p.st
	var rec *seckill.PaymentRecord
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		var err error
		rec, err = p.applyTx(ctx, tx, e, source, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("apply payment %s: %w", e.ID, st.db.classify(err))
	}
	return rec, nil
}

// applyTx is one attempt of ApplyPayment.
func (p *Payments) applyTx(ctx context.Context, tx *sql.Tx, e seckill.PaymentEvent, source seckill.PaymentSource, now time.Time) (*seckill.PaymentRecord, error) {
	old, err := scanPayment(tx.QueryRowContext(ctx, p.st.sql.payments.byEventID, e.ID))
	switch {
	case err == nil:
		if old.PaymentEvent != e {
			return nil, errPaymentKeyReused
		}
		old.Replayed = true
		return old, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, err
	}
	o, currency, err := p.orderAndCurrency(ctx, tx, e.ReservationID)
	if err != nil {
		return nil, err
	}
	nowMs := toMillis(now)
	d := seckill.DecidePayment(o, currency, e, fromMillis(nowMs))
	if typ, ok := d.EventType(); ok {
		if err := p.st.moveOrderTx(ctx, tx, o, d.To, typ, nowMs); err != nil {
			return nil, err
		}
	}
	rec := &seckill.PaymentRecord{
		PaymentEvent: e, OrderID: o.ID, SaleID: o.SaleID, Source: source,
		Outcome: d.Outcome, FromStatus: d.From, ToStatus: d.To,
		Detail: storableText(d.Detail, maxReasonBytes), ReceivedAt: fromMillis(nowMs),
	}
	_, err = tx.ExecContext(ctx, p.st.sql.payments.insert,
		rec.ID, string(rec.Type), rec.ReservationID, rec.SaleID, rec.AmountCents, rec.Currency, string(rec.Source),
		string(rec.Outcome), string(rec.FromStatus), string(rec.ToStatus), rec.Detail, nowMs)
	return rec, err
}

// orderAndCurrency reads the order of a reservation and its sale's
// currency (the default for a sale stored without one). No order:
// ErrNotFound.
func (p *Payments) orderAndCurrency(ctx context.Context, tx *sql.Tx, reservationID string) (*seckill.Order, string, error) {
	var currency string
	o, err := scanOrderThen(tx.QueryRowContext(ctx, p.st.sql.payments.orderAndCurrency, reservationID), &currency)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", seckill.ErrNotFound
	} else if err != nil {
		return nil, "", err
	}
	if currency == "" {
		currency = p.currency
	}
	return o, currency, nil
}

// moveOrderTx moves order o from the status it was read with to status
// to, inside tx, and records the move's event (typ) in the order-event
// outbox in the same transaction: the one conditional update of a
// payment's order move (ordered → paid, cancelled → refund_due,
// refund_due → refunded). If another transaction moved the order first it
// returns errConflict, and the caller's transaction is tried again. o is
// updated to the new state.
func (st *orderDB) moveOrderTx(ctx context.Context, tx *sql.Tx, o *seckill.Order, to seckill.OrderStatus, typ seckill.OrderEventType, nowMs int64) error {
	res, err := tx.ExecContext(ctx, st.sql.payments.moveOrder, string(to), nowMs, o.ReservationID, string(o.Status))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return errConflict
	}
	o.Status, o.UpdatedAt = to, fromMillis(nowMs)
	return st.db.insertOrderEvents(ctx, tx, seckill.NewOrderEvent(typ, o, o.UpdatedAt))
}

// scanOrderThen reads the columns of orderColumns followed by more.
func scanOrderThen(row interface{ Scan(...any) error }, more ...any) (*seckill.Order, error) {
	var s orderScan
	if err := row.Scan(append(s.targets(), more...)...); err != nil {
		return nil, err
	}
	return s.order(), nil
}

// scanPayment reads the columns of paymentColumns.
func scanPayment(row interface{ Scan(...any) error }) (*seckill.PaymentRecord, error) {
	var (
		r                                seckill.PaymentRecord
		typ, source, outcome, fromS, toS string
		receivedMs                       int64
	)
	err := row.Scan(&r.ID, &typ, &r.ReservationID, &r.SaleID, &r.AmountCents, &r.Currency, &source, &outcome,
		&fromS, &toS, &r.Detail, &receivedMs)
	if err != nil {
		return nil, err
	}
	r.Type, r.Source, r.Outcome = seckill.PaymentEventType(typ), seckill.PaymentSource(source), seckill.PaymentOutcome(outcome)
	r.FromStatus, r.ToStatus = seckill.OrderStatus(fromS), seckill.OrderStatus(toS)
	r.OrderID, r.ReceivedAt = seckill.OrderIDOf(r.ReservationID), fromMillis(receivedMs)
	return &r, nil
}

var errBadPaymentCursor = seckill.Errorf(seckill.EINVALID, "before is not a cursor this list returned")

// Payments returns one page of the payment records f selects, newest first
// (received_at_ms, then event id in byte order, both descending), and the
// cursor of the next page ("" after the last). Outcome "" selects those
// that alert (refund_due, mismatch, conflict).
func (p *Payments) Payments(ctx context.Context, f seckill.PaymentFilter) ([]*seckill.PaymentRecord, string, error) {
	st := p.st
	if f.Limit < 1 || f.Limit > seckill.MaxPaymentPage {
		return nil, "", fmt.Errorf("payments: %w", seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d, got %d", seckill.MaxPaymentPage, f.Limit))
	}
	var outcomes []string
	for _, o := range seckill.PaymentOutcomes() {
		if (f.Outcome == "" && o.Alerts()) || o == f.Outcome {
			outcomes = append(outcomes, string(o))
		}
	}
	if len(outcomes) == 0 {
		return nil, "", fmt.Errorf("payments: %w", seckill.Errorf(seckill.EINVALID, "unknown outcome %q", f.Outcome))
	}
	var (
		ms int64
		id string
	)
	if f.Before != "" {
		var err error
		ms, id, err = decodeKeyCursor(f.Before, func(id string) bool { return id != "" && len(id) <= seckill.MaxPaymentEventIDBytes }, errBadPaymentCursor)
		if err != nil {
			return nil, "", fmt.Errorf("payments: %w", err)
		}
	}
	q, args := st.sql.paymentsPage(outcomes, f.Before != "", ms, id, f.Limit+1)
	page, err := queryAll(ctx, st.db.read, scanPayment, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("payments: %w", st.db.classify(err))
	}
	next := ""
	if len(page) > f.Limit {
		page = page[:f.Limit]
		last := page[f.Limit-1]
		next = encodeKeyCursor(toMillis(last.ReceivedAt), last.ID)
	}
	if page == nil {
		page = []*seckill.PaymentRecord{}
	}
	return page, next, nil
}
