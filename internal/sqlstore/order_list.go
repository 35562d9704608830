package sqlstore

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/seckill-dev/seckill"
)

var _ seckill.OrderLister = (*Orders)(nil)

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
