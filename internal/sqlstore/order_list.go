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
// cursor on (pageQuery), so a page costs the same at any depth. A status
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
	page, err := queryAll(ctx, st.db.read, scanOrder, st.orderPageQuery(f.Status != ""), args...)
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

// orderPageQuery is pageQuery of orders (sale $1, after $2, before $3,
// then the limit), and with byStatus of a status ($4, before the limit).
func (st *Orders) orderPageQuery(byStatus bool) string {
	b, c := st.db.dialect.bindFrom, st.byteOrder()
	from, sale, status := "orders", "sale_id", "status"
	switch st.db.dialect {
	case mysqlDialect:
		from += " FORCE INDEX (PRIMARY)"
	case sqliteDialect:
		// No index on these: the range of the key is the plan.
		sale, status = "+sale_id", "+status"
	}
	q := `SELECT ` + orderColumns + ` FROM ` + from + ` WHERE ` + sale + ` = ` + b(1) +
		` AND reservation_id` + c + ` > ` + b(2) + ` AND reservation_id` + c + ` < ` + b(3)
	limit := 4
	if byStatus {
		q += ` AND ` + status + ` = ` + b(4)
		limit = 5
	}
	return q + ` ORDER BY reservation_id` + c + ` LIMIT ` + b(limit)
}
