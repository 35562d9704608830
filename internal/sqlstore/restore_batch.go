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
	valid, first := idsOfSale(saleID, ids, results)
	found, err := st.readRestoreState(ctx, tx, valid)
	if err != nil {
		return err
	}
	plan, err := planRestores(saleID, valid, first, found, reason, nowMs, results)
	if err != nil {
		return err
	}
	// A repeated id answers as a second call would: unchanged.
	for i, id := range ids {
		if j, ok := first[id]; ok && j != i {
			r := results[j]
			results[i] = seckill.OrderRestore{Order: r.Order, Err: r.Err}
		}
	}
	if plan.units > 0 && stock > initial-plan.units {
		return fmt.Errorf("return %d units to sale %s: its stock %d would exceed the %d put on sale: units were returned before (a bug)",
			plan.units, saleID, stock, initial)
	}
	return st.applyRestores(ctx, tx, saleID, plan, found.orders, reason, nowMs)
}

// idsOfSale returns the ids this call may touch: those of the sale, once
// each, with the index of each one's first mention. Another sale's id
// answers ErrNotFound in results.
func idsOfSale(saleID string, ids []string, results []seckill.OrderRestore) (valid []string, first map[string]int) {
	first = make(map[string]int, len(ids))
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
	return valid, first
}

// restoreState is what the database holds of the ids to restore.
type restoreState struct {
	orders   map[string]*seckill.Order // locked
	failed   map[string]bool           // ids with a failed order and no order
	requests map[string]string         // reasons of the restore requests, by id
}

func (st *RestoreStore) readRestoreState(ctx context.Context, tx *sql.Tx, valid []string) (restoreState, error) {
	found := restoreState{orders: make(map[string]*seckill.Order, len(valid)), failed: map[string]bool{}}
	err := st.eachRowIn(ctx, tx, st.rq.ordersIn, valid, func(rows *sql.Rows) error {
		o, err := scanOrder(rows)
		if err == nil {
			found.orders[o.ReservationID] = o
		}
		return err
	}, st.rq.lockSuffix)
	if err != nil {
		return found, fmt.Errorf("read orders: %w", err)
	}
	var missing []string
	for _, id := range valid {
		if found.orders[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		if found.failed, err = st.existing(ctx, tx, missing); err != nil {
			return found, fmt.Errorf("find failed orders: %w", err)
		}
	}
	if found.requests, err = st.restoresOf(ctx, tx, valid); err != nil {
		return found, fmt.Errorf("read restore requests: %w", err)
	}
	return found, nil
}

// restorePlan is the writes of one RestoreOrders call.
type restorePlan struct {
	cancel []string                  // orders to cancel
	reopen []string                  // requests to move to redis_pending with reason
	insert []*seckill.RestoreRequest // requests to create
	units  int64                     // returned to the sale's stock
}

// planRestores decides each id's restore as RestoreOrder would, filling
// results[first[id]] (a placed order is answered cancelled).
func planRestores(saleID string, valid []string, first map[string]int, found restoreState, reason string, nowMs int64, results []seckill.OrderRestore) (restorePlan, error) {
	var plan restorePlan
	for _, id := range valid {
		i := first[id]
		_, hasRequest := found.requests[id]
		o := found.orders[id]
		switch {
		case o == nil && !found.failed[id]:
			results[i].Err = seckill.ErrNotFound
		case o == nil: // a failed order: only the Redis step is left
			if !hasRequest {
				plan.insert = append(plan.insert, pendingRequest(saleID, id, reason, nowMs))
				results[i].Changed = true
			}
		case o.Status == seckill.OrderPlaced:
			plan.cancel = append(plan.cancel, id)
			plan.units += o.Qty
			if hasRequest {
				plan.reopen = append(plan.reopen, id)
			} else {
				plan.insert = append(plan.insert, pendingRequest(saleID, id, reason, nowMs))
			}
			o.Status, o.CancelReason, o.UpdatedAt = seckill.OrderCancelled, reason, fromMillis(nowMs)
			results[i].Order, results[i].Changed = o, true
		case o.Status == seckill.OrderCancelled || o.Status == seckill.OrderRefundDue || o.Status == seckill.OrderRefunded:
			if !hasRequest {
				plan.insert = append(plan.insert, pendingRequest(saleID, id, reason, nowMs))
			}
			results[i].Order = o
		case o.Status == seckill.OrderPaid:
			results[i].Err = seckill.Errorf(seckill.ESTATECONFLICT, "order is paid")
		default:
			return plan, fmt.Errorf("order %s has unknown status %q", id, o.Status)
		}
	}
	return plan, nil
}

// applyRestores writes plan: orders cancelled, units returned, their
// events recorded, requests reopened and inserted.
func (st *RestoreStore) applyRestores(ctx context.Context, tx *sql.Tx, saleID string, plan restorePlan, orders map[string]*seckill.Order, reason string, nowMs int64) error {
	if err := st.execIn(ctx, tx, st.rq.cancelOrdersIn, plan.cancel,
		string(seckill.OrderCancelled), reason, nowMs, string(seckill.OrderPlaced)); err != nil {
		return fmt.Errorf("cancel orders: %w", err)
	}
	if plan.units > 0 {
		res, err := tx.ExecContext(ctx, st.rq.returnStock, plan.units, nowMs, saleID, plan.units)
		if err != nil {
			return fmt.Errorf("return stock: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("return stock: %w", err)
		} else if n != 1 {
			return fmt.Errorf("return %d units to sale %s: its stock would exceed what was put on sale (a bug)", plan.units, saleID)
		}
	}
	if st.db.orderEvents {
		events := make([]seckill.OrderEvent, 0, len(plan.cancel))
		for _, id := range plan.cancel {
			events = append(events, seckill.NewOrderEvent(seckill.EventOrderCancelled, orders[id], fromMillis(nowMs)))
		}
		if err := st.db.insertOrderEvents(ctx, tx, events...); err != nil {
			return err
		}
	}
	if err := st.execIn(ctx, tx, st.rq.reopenRequestsIn, plan.reopen,
		string(seckill.RestoreStateRedisPending), reason, nowMs); err != nil {
		return fmt.Errorf("reopen restore requests: %w", err)
	}
	return st.insertRequests(ctx, tx, plan.insert)
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
