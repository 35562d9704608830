package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/seckill-dev/seckill"
)

// The operators' list of failed orders, a page at a time by keyset on
// (created_at_ms, reservation_id) descending, of one sale or all, open,
// resolved or both; and the counts of each sale's failed orders. One
// sale's pages are a range of failed_orders_sale_created_idx (0010); all
// sales' pages walk failed_orders_created_idx.

var errBadFailedCursor = seckill.Errorf(seckill.EINVALID, "before is not a cursor this list returned")

// FailedOrders returns one page of the failed orders f selects, newest
// first (created_at_ms, then reservation id in byte order, both
// descending), and the cursor of the next page: base64url of
// "<created_at ms>:<reservation id>" of the page's last row, "" when no
// row follows. Keyset paging, so a page costs the same however deep it
// is, and rows recorded meanwhile never shift a row into a second page.
func (st *OrderStore) FailedOrders(ctx context.Context, f seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error) {
	q, args, err := st.failedPageQuery(f)
	if err != nil {
		return nil, "", fmt.Errorf("failed orders: %w", err)
	}
	page, err := queryAll(ctx, st.db.read, scanFailedOrder, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("failed orders: %w", st.db.classify(err))
	}
	next := ""
	if len(page) > f.Limit {
		page = page[:f.Limit]
		last := page[f.Limit-1]
		next = encodeKeyCursor(toMillis(last.CreatedAt), last.ReservationID)
	}
	if page == nil {
		page = []*seckill.FailedOrder{}
	}
	return page, next, nil
}

// failedPageQuery is the SQL of FailedOrders(f) and its arguments: up to
// f.Limit+1 rows, the one beyond the limit saying that a next page exists.
func (st *OrderStore) failedPageQuery(f seckill.FailedOrderFilter) (string, []any, error) {
	if f.Limit < 1 || f.Limit > seckill.MaxFailedOrderPage {
		return "", nil, seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d, got %d", seckill.MaxFailedOrderPage, f.Limit)
	}
	// A stored sale id is storable text (RecordFailedOrder): nothing else
	// can match, and PostgreSQL would refuse a NUL outright.
	if f.SaleID != "" && storableText(f.SaleID, maxFailedTextBytes) != f.SaleID {
		return "", nil, seckill.Errorf(seckill.EINVALID, "sale id must be at most %d bytes of UTF-8 without NUL", maxFailedTextBytes)
	}
	d := st.db.dialect
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return d.bindFrom(len(args)) }
	if f.SaleID != "" {
		where = append(where, "sale_id = "+arg(f.SaleID))
	}
	switch f.State {
	case "", seckill.FailedAll:
	case seckill.FailedOpen:
		where = append(where, "resolved_at_ms IS NULL")
	case seckill.FailedResolved:
		where = append(where, "resolved_at_ms IS NOT NULL")
	default:
		return "", nil, seckill.Errorf(seckill.EINVALID, "state must be open, resolved or all, got %q", f.State)
	}
	c := st.byteOrder()
	if f.Before != "" {
		ms, id, err := decodeKeyCursor(f.Before, validFailedKey, errBadFailedCursor)
		if err != nil {
			return "", nil, err
		}
		// The row value (created_at_ms, reservation_id) < (ms, id), spelt
		// so that every dialect sees a range on created_at_ms.
		where = append(where, "created_at_ms <= "+arg(ms)+
			" AND (created_at_ms < "+arg(ms)+" OR reservation_id"+c+" < "+arg(id)+")")
	}
	q := `SELECT ` + failedOrderSelect + ` FROM failed_orders`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at_ms DESC, reservation_id" + c + " DESC LIMIT " + arg(f.Limit+1)
	return q, args, nil
}

// FailedOrderCounts counts each sale's open and resolved failed orders in
// one grouped read, the sale with the newest failed order first. COUNT of
// resolved_at_ms counts the resolved ones (it skips NULLs) and is a
// BIGINT in every dialect, where SUM is a NUMERIC in PostgreSQL.
func (st *OrderStore) FailedOrderCounts(ctx context.Context) ([]seckill.FailedOrderCount, error) {
	rows, err := st.db.read.QueryContext(ctx, `SELECT sale_id, COUNT(*), COUNT(resolved_at_ms), MAX(created_at_ms)
		FROM failed_orders GROUP BY sale_id ORDER BY MAX(created_at_ms) DESC, sale_id`)
	if err != nil {
		return nil, fmt.Errorf("failed order counts: %w", st.db.classify(err))
	}
	defer rows.Close()
	counts := []seckill.FailedOrderCount{}
	for rows.Next() {
		var (
			c          seckill.FailedOrderCount
			all, newMs int64
		)
		if err := rows.Scan(&c.SaleID, &all, &c.Resolved, &newMs); err != nil {
			return nil, fmt.Errorf("failed order counts: %w", st.db.classify(err))
		}
		c.Open, c.Newest = all-c.Resolved, fromMillis(newMs)
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed order counts: %w", st.db.classify(err))
	}
	return counts, nil
}
