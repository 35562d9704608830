package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// RestoreOrders is RestoreOrder for many reservations of one sale, in one
// transaction of a fixed number of statements per chunk of ids (the sale
// locked once, the orders read and locked with one SELECT, cancelled with
// one UPDATE, their units returned with one UPDATE of the sale, their
// requests reopened with one UPDATE and the missing ones inserted with one
// multi-row INSERT), where RestoreOrder costs five statements and a commit
// per order. The payment-timeout sweeper restores its expired orders here.
//
// results[i] answers reservationIDs[i] exactly as RestoreOrder would have
// (ESTATECONFLICT for a paid order; ErrNotFound for an id of another sale
// or one with neither an order nor a failed order; an id listed twice
// answers as a second call would: unchanged). An error of the whole call
// (the sale is unknown: ErrNotFound; a database failure; units that would
// take the stock past what was put on sale, a bug) writes nothing.
func (st *RestoreStore) RestoreOrders(ctx context.Context, saleID string, reservationIDs []string, reason string, now time.Time) ([]seckill.OrderRestore, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("restore orders of sale %q: %w", saleID, seckill.ErrNotFound)
	}
	reason = storableText(reason, maxReasonBytes)
	nowMs := toMillis(now)
	var results []seckill.OrderRestore
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		results = make([]seckill.OrderRestore, len(reservationIDs))
		stock, initial, err := st.lockSale(ctx, tx, saleID)
		if err != nil {
			return err
		}
		return st.restoreOrdersLocked(ctx, tx, saleID, reservationIDs, reason, nowMs, stock, initial, results)
	})
	if err != nil {
		return nil, fmt.Errorf("restore %d orders of sale %s: %w", len(reservationIDs), saleID, err)
	}
	return results, nil
}

func (st *RestoreStore) restoreOrdersLocked(ctx context.Context, tx *sql.Tx, saleID string, ids []string, reason string, nowMs, stock, initial int64, results []seckill.OrderRestore) error {
	// The ids this call may touch: those of the sale, once each.
	var valid []string
	first := make(map[string]int, len(ids)) // id -> index of its first mention
	for i, id := range ids {
		if s, ok := seckill.SaleIDOfReservation(id); !ok || s != saleID {
			results[i].Err = seckill.ErrNotFound
			continue
		}
		if _, dup := first[id]; dup {
			continue
		}
		first[id] = i
		valid = append(valid, id)
	}
	orders := make(map[string]*seckill.Order, len(valid))
	err := st.eachRowIn(ctx, tx, st.rq.ordersIn, valid, func(rows *sql.Rows) error {
		o, err := scanOrder(rows)
		if err == nil {
			orders[o.ReservationID] = o
		}
		return err
	}, st.rq.lockSuffix)
	if err != nil {
		return fmt.Errorf("read orders: %w", err)
	}
	var missing []string
	for _, id := range valid {
		if orders[id] == nil {
			missing = append(missing, id)
		}
	}
	failed := map[string]bool{}
	if len(missing) > 0 {
		if failed, err = st.existing(ctx, tx, missing); err != nil {
			return fmt.Errorf("find failed orders: %w", err)
		}
	}
	requests, err := st.restoresOf(ctx, tx, valid)
	if err != nil {
		return fmt.Errorf("read restore requests: %w", err)
	}

	var (
		cancel  []string                  // orders to cancel
		reopen  []string                  // requests to move to redis_pending with reason
		insert  []*seckill.RestoreRequest // requests to create
		units   int64                     // returned to the sale's stock
		changed = map[string]bool{}
	)
	for _, id := range valid {
		i := first[id]
		_, hasRequest := requests[id]
		o := orders[id]
		switch {
		case o == nil && !failed[id]:
			results[i].Err = seckill.ErrNotFound
		case o == nil: // a failed order: only the Redis step is left
			if !hasRequest {
				insert = append(insert, pendingRequest(saleID, id, reason, nowMs))
				results[i].Changed, changed[id] = true, true
			}
		case o.Status == seckill.OrderPlaced:
			cancel = append(cancel, id)
			units += o.Qty
			if hasRequest {
				reopen = append(reopen, id)
			} else {
				insert = append(insert, pendingRequest(saleID, id, reason, nowMs))
			}
			o.Status, o.CancelReason, o.UpdatedAt = seckill.OrderCancelled, reason, fromMillis(nowMs)
			results[i].Order, results[i].Changed, changed[id] = o, true, true
		case o.Status == seckill.OrderCancelled || o.Status == seckill.OrderRefundDue || o.Status == seckill.OrderRefunded:
			if !hasRequest {
				insert = append(insert, pendingRequest(saleID, id, reason, nowMs))
			}
			results[i].Order = o
		case o.Status == seckill.OrderPaid:
			results[i].Err = seckill.Errorf(seckill.ESTATECONFLICT, "order is paid")
		default:
			return fmt.Errorf("order %s has unknown status %q", id, o.Status)
		}
	}
	// A repeated id answers as a second call would: unchanged.
	for i, id := range ids {
		if j, ok := first[id]; ok && j != i {
			r := results[j]
			results[i] = seckill.OrderRestore{Order: r.Order, Err: r.Err}
		}
	}

	if units > 0 && stock > initial-units {
		return fmt.Errorf("return %d units to sale %s: its stock %d would exceed the %d put on sale: units were returned before (a bug)",
			units, saleID, stock, initial)
	}
	if err := st.execIn(ctx, tx, st.rq.cancelOrdersIn, cancel,
		string(seckill.OrderCancelled), reason, nowMs, string(seckill.OrderPlaced)); err != nil {
		return fmt.Errorf("cancel orders: %w", err)
	}
	if units > 0 {
		res, err := tx.ExecContext(ctx, st.rq.returnStock, units, nowMs, saleID, units)
		if err != nil {
			return fmt.Errorf("return stock: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("return stock: %w", err)
		} else if n != 1 {
			return fmt.Errorf("return %d units to sale %s: its stock would exceed what was put on sale (a bug)", units, saleID)
		}
	}
	if st.db.orderEvents {
		events := make([]seckill.OrderEvent, 0, len(cancel))
		for _, id := range cancel {
			events = append(events, seckill.NewOrderEvent(seckill.EventOrderCancelled, orders[id], fromMillis(nowMs)))
		}
		if err := st.db.insertOrderEvents(ctx, tx, events...); err != nil {
			return err
		}
	}
	if err := st.execIn(ctx, tx, st.rq.reopenRequestsIn, reopen,
		string(seckill.RestoreStateRedisPending), reason, nowMs); err != nil {
		return fmt.Errorf("reopen restore requests: %w", err)
	}
	return st.insertRequests(ctx, tx, insert)
}

// execIn runs head + "(ids…)" with args before the ids, in chunks of
// idChunk, and fails with errConflict unless every chunk changed one row
// per id (the rows are locked, or the ids were read under the sale's
// lock: only a concurrent writer that ignored the lock gets there).
func (st *RestoreStore) execIn(ctx context.Context, tx *sql.Tx, head string, ids []string, args ...any) error {
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		all := make([]any, 0, len(args)+len(chunk))
		all = append(all, args...)
		for _, id := range chunk {
			all = append(all, id)
		}
		res, err := tx.ExecContext(ctx, head+st.q.list(len(args)+1, len(chunk)), all...)
		if err != nil {
			return st.conflictOr(err, "update")
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != int64(len(chunk)) {
			return fmt.Errorf("%d of %d rows changed under the lock: %w", n, len(chunk), errConflict)
		}
	}
	return nil
}

// insertRequests inserts rs, whose text is storable already, with
// multi-row INSERTs.
func (st *RestoreStore) insertRequests(ctx context.Context, tx *sql.Tx, rs []*seckill.RestoreRequest) error {
	const width = 9 // restoreColumns
	for start := 0; start < len(rs); start += insertChunk {
		chunk := rs[start:min(start+insertChunk, len(rs))]
		args := make([]any, 0, width*len(chunk))
		for _, r := range chunk {
			var alerted any
			if !r.AlertedAt.IsZero() {
				alerted = toMillis(r.AlertedAt)
			}
			args = append(args, r.ReservationID, r.SaleID, r.Reason, string(r.State),
				int64(r.Attempts), r.LastError, alerted, toMillis(r.CreatedAt), toMillis(r.UpdatedAt))
		}
		if _, err := tx.ExecContext(ctx, st.rq.insertRequestsHead+st.q.tuples(len(chunk), width), args...); err != nil {
			return st.conflictOr(err, "insert restore requests")
		}
	}
	return nil
}

// FinishRestores records the Redis step of many requests as done, in one
// statement per chunk of ids: state done, LastError = lastErr, Attempts +
// 1, UpdatedAt = now. Done is the last state, so no request moves back;
// ids with no request are skipped.
func (st *RestoreStore) FinishRestores(ctx context.Context, reservationIDs []string, lastErr string, now time.Time) error {
	var ids []string
	for _, id := range reservationIDs {
		if validReservationID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		for start := 0; start < len(ids); start += idChunk {
			chunk := ids[start:min(start+idChunk, len(ids))]
			args := make([]any, 0, 3+len(chunk))
			args = append(args, string(seckill.RestoreStateDone), storableText(lastErr, maxReasonBytes), toMillis(now))
			for _, id := range chunk {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, st.rq.finishRequestsIn+st.q.list(4, len(chunk)), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish %d restores: %w", len(ids), err)
	}
	return nil
}
