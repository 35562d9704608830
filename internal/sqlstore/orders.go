package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// Orders is a DB's orders after the writer made them: one by reservation,
// a buyer's, a sale's a page at a time (seckill.OrderLister), and the
// conditional moves of payment and cancellation.
type Orders struct{ *orderDB }

var _ seckill.OrderLister = (*Orders)(nil)

// MaxBuyerOrders caps BuyerOrders: a buyer's orders of one sale are at
// most its per-user limit (seckill.MaxPurchaseLimit), plus the cancelled
// ones of a buyer who bought again.
const MaxBuyerOrders = 100

// BuyerOrders returns the buyer's orders of a sale, oldest first, at most
// MaxBuyerOrders (on the orders (sale_id, user_id) index). An invalid sale
// or user id has none.
func (st *Orders) BuyerOrders(ctx context.Context, saleID, userID string) ([]*seckill.Order, error) {
	if !seckill.ValidSaleID(saleID) || !seckill.ValidUserID(userID) {
		return nil, nil
	}
	orders, err := queryAll(ctx, st.db.read, scanOrder, st.q.buyerOrders, saleID, userID)
	if err != nil {
		return nil, fmt.Errorf("orders of a buyer of sale %s: %w", saleID, st.db.classify(err))
	}
	return orders, nil
}

// BuyerFailedOrders returns the buyer's failed orders of a sale, oldest
// first, at most MaxBuyerOrders; an invalid sale or user id has none. It
// reads the buyer's rows of failed_orders_sale_user_idx (0020): a sale
// may gather thousands of failed orders in an outage, while its buyers'
// pages poll this.
func (st *FailedOrderStore) BuyerFailedOrders(ctx context.Context, saleID, userID string) ([]*seckill.FailedOrder, error) {
	if !seckill.ValidSaleID(saleID) || !seckill.ValidUserID(userID) {
		return nil, nil
	}
	failed, err := queryAll(ctx, st.db.read, scanFailedOrder, st.q.buyerFailed, saleID, userID)
	if err != nil {
		return nil, fmt.Errorf("failed orders of a buyer of sale %s: %w", saleID, st.db.classify(err))
	}
	return failed, nil
}

// Order returns the order of a reservation; ErrNotFound when none.
func (st *Orders) Order(ctx context.Context, reservationID string) (*seckill.Order, error) {
	return byReservation(ctx, st.orderDB, "order", validReservationID, scanOrder, st.q.order, reservationID)
}

// PayOrder moves an ordered order whose PayBy is after now to paid. An
// order already paid, cancelled or past its PayBy (PayBy <= now, at
// millisecond precision) is ESTATECONFLICT; an unknown reservation is
// ErrNotFound.
func (st *Orders) PayOrder(ctx context.Context, reservationID string, now time.Time) (*seckill.Order, error) {
	if !validReservationID(reservationID) {
		return nil, fmt.Errorf("pay order of reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	nowMs := toMillis(now)
	var o *seckill.Order
	// Retried: on MySQL a payment racing a restore of the same order can
	// be chosen as a deadlock victim, which is not an answer for the buyer.
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, st.q.payOrder,
			string(seckill.OrderPaid), nowMs, reservationID, string(seckill.OrderPlaced), nowMs)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if o, err = st.orderInTx(ctx, tx, reservationID); err != nil {
			return err
		} else if n == 1 {
			return st.db.insertOrderEvents(ctx, tx, seckill.NewOrderEvent(seckill.EventOrderPaid, o, o.UpdatedAt))
		}
		if err := o.PayRefusal(fromMillis(nowMs)); err != nil {
			return err
		}
		return seckill.Errorf(seckill.ESTATECONFLICT, "order is %s", o.Status) // moved by another transaction meanwhile
	})
	if err != nil {
		return nil, fmt.Errorf("pay order of reservation %s: %w", reservationID, st.db.classify(err))
	}
	return o, nil
}

// CancelOrder moves an ordered order (expired or not) to cancelled with
// reason, which is cut to 2000 bytes of valid UTF-8. It does not return
// the order's stock to the sale. An order already cancelled is returned
// unchanged with changed=false; a paid one is ESTATECONFLICT; an unknown
// reservation is ErrNotFound.
func (st *Orders) CancelOrder(ctx context.Context, reservationID, reason string, now time.Time) (*seckill.Order, bool, error) {
	if !validReservationID(reservationID) {
		return nil, false, fmt.Errorf("cancel order of reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	var (
		o       *seckill.Order
		changed bool
	)
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error { // as PayOrder
		res, err := tx.ExecContext(ctx, st.q.cancelOrder,
			string(seckill.OrderCancelled), storableText(reason, maxReasonBytes), toMillis(now),
			reservationID, string(seckill.OrderPlaced))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if o, err = st.orderInTx(ctx, tx, reservationID); err != nil {
			return err
		}
		changed = n == 1
		if !changed && o.Status != seckill.OrderCancelled {
			return seckill.Errorf(seckill.ESTATECONFLICT, "order is %s", o.Status)
		} else if changed {
			return st.db.insertOrderEvents(ctx, tx, seckill.NewOrderEvent(seckill.EventOrderCancelled, o, o.UpdatedAt))
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("cancel order of reservation %s: %w", reservationID, st.db.classify(err))
	}
	return o, changed, nil
}

// orderInTx reads an order inside tx, so that it shows tx's own change.
func (st *Orders) orderInTx(ctx context.Context, tx *sql.Tx, reservationID string) (*seckill.Order, error) {
	o, err := scanOrder(tx.QueryRowContext(ctx, st.q.order, reservationID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.ErrNotFound
	}
	return o, err
}

// ExpiredOrders lists up to limit orders still ordered with PayBy <= now
// (at millisecond precision), oldest deadline first. limit must be
// positive.
func (st *Orders) ExpiredOrders(ctx context.Context, now time.Time, limit int) ([]*seckill.Order, error) {
	if limit < 1 {
		return nil, fmt.Errorf("expired orders: %w", seckill.Errorf(seckill.EINVALID, "limit must be positive, got %d", limit))
	}
	orders, err := queryAll(ctx, st.db.read, scanOrder, st.q.expiredOrders, string(seckill.OrderPlaced), toMillis(now), limit)
	if err != nil {
		return nil, fmt.Errorf("expired orders: %w", st.db.classify(err))
	}
	return orders, nil
}

var errBadOrderCursor = seckill.Errorf(seckill.EINVALID, "cursor is not the next of a page of this sale's orders")

// OrderPage returns one page of a sale's orders by reservation id (byte
// order), as seckill.OrderLister says: a range of the primary key from the
// cursor on (orderQueries.orderPage), so a page costs the same at any depth. A status
// filter is checked on the rows of that range: a page of a rare status may
// read more of the sale's rows than it returns. The cursor is base64url of
// the page's last reservation id.
func (st *Orders) OrderPage(ctx context.Context, f seckill.OrderFilter) ([]*seckill.Order, string, error) {
	switch {
	case !seckill.ValidSaleID(f.SaleID):
		return nil, "", fmt.Errorf("order page: %w", seckill.Errorf(seckill.EINVALID, "sale id %q is not valid", f.SaleID))
	case f.Limit < 1 || f.Limit > seckill.MaxOrderPage:
		return nil, "", fmt.Errorf("order page: %w", seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d, got %d", seckill.MaxOrderPage, f.Limit))
	case f.Status != "" && !f.Status.Known():
		return nil, "", fmt.Errorf("order page: %w", seckill.Errorf(seckill.EINVALID, "unknown order status %q", f.Status))
	}
	after := f.SaleID + "."
	if f.Cursor != "" {
		raw, err := base64.RawURLEncoding.Strict().DecodeString(f.Cursor)
		if sale, ok := seckill.SaleIDOfReservation(string(raw)); err != nil || !ok || sale != f.SaleID {
			return nil, "", fmt.Errorf("order page: %w", errBadOrderCursor)
		}
		after = string(raw)
	}
	args := []any{f.SaleID, after, f.SaleID + "/"}
	if f.Status != "" {
		args = append(args, string(f.Status))
	}
	args = append(args, f.Limit+1)
	query := st.q.orderPage
	if f.Status != "" {
		query = st.q.orderPageByStatus
	}
	page, err := queryAll(ctx, st.db.read, scanOrder, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("orders of sale %s: %w", f.SaleID, st.db.classify(err))
	}
	next := ""
	if len(page) > f.Limit {
		page = page[:f.Limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(page[f.Limit-1].ReservationID))
	}
	if page == nil {
		page = []*seckill.Order{}
	}
	return page, next, nil
}
