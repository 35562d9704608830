package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// FailedOrderStore is a DB's failed orders as their readers and the
// operators see them: one by reservation, the operators' list and counts,
// and their resolution (seckill.FailedOrderResolver). The order writer
// records them (OrderWriter.RecordFailedOrder).
type FailedOrderStore struct{ *orderDB }

var _ seckill.FailedOrderResolver = (*FailedOrderStore)(nil)

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
func (st *FailedOrderStore) FailedOrders(ctx context.Context, f seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error) {
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
func (st *FailedOrderStore) failedPageQuery(f seckill.FailedOrderFilter) (string, []any, error) {
	if f.Limit < 1 || f.Limit > seckill.MaxFailedOrderPage {
		return "", nil, seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d, got %d", seckill.MaxFailedOrderPage, f.Limit)
	}
	// A stored sale id is storable text (RecordFailedOrder): nothing else
	// can match, and PostgreSQL would refuse a NUL outright.
	if f.SaleID != "" && storableText(f.SaleID, maxFailedTextBytes) != f.SaleID {
		return "", nil, seckill.Errorf(seckill.EINVALID, "sale id must be at most %d bytes of UTF-8 without NUL", maxFailedTextBytes)
	}
	switch f.State {
	case "", seckill.FailedAll, seckill.FailedOpen, seckill.FailedResolved:
	default:
		return "", nil, seckill.Errorf(seckill.EINVALID, "state must be open, resolved or all, got %q", f.State)
	}
	var (
		ms int64
		id string
	)
	if f.Before != "" {
		var err error
		if ms, id, err = decodeKeyCursor(f.Before, validFailedKey, errBadFailedCursor); err != nil {
			return "", nil, err
		}
	}
	q, args := st.sql.failedPage(f.SaleID, f.State, f.Before != "", ms, id, f.Limit+1)
	return q, args, nil
}

// FailedOrderCounts counts each sale's open and resolved failed orders in
// one grouped read, the sale with the newest failed order first.
func (st *FailedOrderStore) FailedOrderCounts(ctx context.Context) ([]seckill.FailedOrderCount, error) {
	rows, err := st.db.read.QueryContext(ctx, st.q.failedCounts)
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

// FailedOrder returns the failed order of a reservation; ErrNotFound when
// none.
func (st *FailedOrderStore) FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error) {
	return byReservation(ctx, st.orderDB, "failed order", validFailedKey, scanFailedOrder, st.q.failedOrder, reservationID)
}

// ResolveFailedOrder closes a failed order (see seckill.FailedOrderResolver).
// A re-drive takes the units with the order writer's optimistic-lock update
// (stock - qty, version + 1 where version and stock >= qty) after checking
// the buyer's orders of the sale (ordered or paid) leave room in the limit;
// a reservation with a restore request is refused, since its units went
// back to the stock store.
func (st *FailedOrderStore) ResolveFailedOrder(ctx context.Context, reservationID string, action seckill.FailedOrderAction, note, actor string, now time.Time, payTimeout time.Duration) (*seckill.Resolution, bool, error) {
	if action != seckill.ResolveRedrive && action != seckill.ResolveRefunded {
		return nil, false, seckill.Errorf(seckill.EINVALID, "action must be redrive or refunded")
	}
	if !validFailedKey(reservationID) {
		return nil, false, fmt.Errorf("failed order of reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	note = storableText(note, seckill.MaxResolutionNoteLen)
	aq := &st.sql.admin
	var (
		out     *seckill.Resolution
		changed bool
	)
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		out, changed = nil, false
		f, err := scanFailedOrder(tx.QueryRowContext(ctx, aq.failedForUpdate, reservationID))
		if errors.Is(err, sql.ErrNoRows) {
			return seckill.ErrNotFound
		} else if err != nil {
			return err
		}
		if r := f.Resolution; r != nil {
			if r.Action != action {
				return seckill.Errorf(seckill.ESTATECONFLICT, "%s (%s).", seckill.RedriveResolved, r.Action)
			}
			out = r
			return nil
		}
		nowMs := toMillis(now)
		res := &seckill.Resolution{Action: action, Note: note, Actor: actor, ResolvedAt: fromMillis(nowMs)}
		if action == seckill.ResolveRedrive {
			if err := st.redrive(ctx, tx, aq, f, nowMs, payTimeout); err != nil {
				return err
			}
			res.OrderID = seckill.OrderIDOf(f.ReservationID)
		}
		r, err := tx.ExecContext(ctx, aq.resolveFailed, nowMs, string(action), note, actor, reservationID)
		if err := checkOne(r, err, "resolve failed order"); err != nil {
			return err
		}
		detail, _ := json.Marshal(map[string]any{"qty": f.Qty, "user_id": f.UserID, "reason": f.Reason, "note": note, "order_id": res.OrderID})
		entry := &seckill.AuditEntry{SaleID: f.SaleID, Subject: f.ReservationID, Actor: actor,
			Action: "failed_order." + string(action), Detail: string(detail), At: res.ResolvedAt}
		if err := insertAudit(ctx, tx, aq, entry); err != nil {
			return err
		}
		out, changed = res, true
		return nil
	})
	if errors.Is(err, seckill.ErrNotFound) {
		return nil, false, fmt.Errorf("failed order of reservation %s: %w", reservationID, seckill.ErrNotFound)
	} else if err != nil {
		return nil, false, fmt.Errorf("resolve failed order of reservation %s: %w", reservationID, err)
	}
	return out, changed, nil
}

// redrive inserts the order of failed order f in tx, or refuses with the
// reason (ESTATECONFLICT).
func (st *FailedOrderStore) redrive(ctx context.Context, tx *sql.Tx, aq *adminQueries, f *seckill.FailedOrder, nowMs int64, payTimeout time.Duration) error {
	refuse := func(reason string) error {
		return seckill.Errorf(seckill.ESTATECONFLICT, "Cannot re-drive: %s.", reason)
	}
	saleID, ok := seckill.SaleIDOfReservation(f.ReservationID)
	if !ok || saleID != f.SaleID || !seckill.ValidUserID(f.UserID) || f.Qty < 1 || f.Qty > seckill.MaxPurchaseLimit {
		return refuse(seckill.RedriveInvalid)
	}
	var stock, version, price, limit int64
	err := tx.QueryRowContext(ctx, aq.saleForRedrive, saleID).Scan(&stock, &version, &price, &limit)
	if errors.Is(err, sql.ErrNoRows) {
		return refuse(seckill.RedriveNoSale)
	} else if err != nil {
		return fmt.Errorf("read sale: %w", err)
	}
	restores, err := st.restoresOf(ctx, tx, []string{f.ReservationID})
	if err != nil {
		return fmt.Errorf("find restore request: %w", err)
	}
	if _, ok := restores[f.ReservationID]; ok {
		return refuse(seckill.RedriveRestored)
	}
	var held int64
	err = tx.QueryRowContext(ctx, aq.buyerHeld, saleID, f.UserID, string(seckill.OrderPlaced), string(seckill.OrderPaid)).Scan(&held)
	if err != nil {
		return fmt.Errorf("count the buyer's orders: %w", err)
	}
	switch {
	case held+f.Qty > limit:
		return refuse(fmt.Sprintf("%s (holds %d, limit %d, asks %d)", seckill.RedriveLimitReached, held, limit, f.Qty))
	case f.Qty > stock:
		return refuse(fmt.Sprintf("%s (%d left, asks %d)", seckill.RedriveNoStock, stock, f.Qty))
	}
	res, err := tx.ExecContext(ctx, st.q.takeStock, f.Qty, nowMs, saleID, version, f.Qty)
	if err != nil {
		return st.conflictOr(err, "take stock")
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("take stock: %w", err)
	} else if n != 1 {
		return fmt.Errorf("take %d of stock at version %d: version moved: %w", f.Qty, version, errConflict)
	}
	reservedAt := f.CreatedAt
	var e seckill.ReservationEvent
	if json.Unmarshal(f.Payload, &e) == nil && !e.ReservedAt.IsZero() {
		reservedAt = e.ReservedAt
	}
	o := &seckill.Order{
		ID: seckill.OrderIDOf(f.ReservationID), ReservationID: f.ReservationID, SaleID: saleID,
		UserID: f.UserID, Qty: f.Qty, AmountCents: f.Qty * price, Status: seckill.OrderPlaced,
		PayBy:      fromMillis(toMillis(fromMillis(nowMs).Add(payTimeout))),
		ReservedAt: fromMillis(toMillis(reservedAt)), CreatedAt: fromMillis(nowMs), UpdatedAt: fromMillis(nowMs),
		KeyDigest: keyDigestOf(e),
	}
	if err := st.insertOrders(ctx, tx, []*seckill.Order{o}); err != nil {
		return st.conflictOr(err, "insert order")
	}
	return st.db.insertOrderEvents(ctx, tx, seckill.NewOrderEvent(seckill.EventOrderCreated, o, o.CreatedAt))
}
