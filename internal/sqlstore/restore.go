package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// RestoreStore is the restore.Store of a DB: restore requests,
// and the orders and stock a restore changes with them in one
// transaction. PersistReservations honours parked requests in its own.
type RestoreStore struct {
	*orderDB
	// beforePark, when set (by tests), runs in every attempt of
	// ParkRestore that found nothing to restore, after its reads and
	// before it parks: the window the sale's row lock keeps writers out of.
	beforePark func()
}

// Locking. Every transaction that creates a restore request, or decides
// on an order's restore, first locks the sale's row (restoreQueries.
// lockSale), the row PersistReservations and RecordFailedOrder update. So
// on one sale they take turns, always in the same order (sale, then order,
// then request: no deadlock among them), and the reads that follow the
// lock see every write of the writers before them, even under MySQL's
// REPEATABLE READ, whose snapshot is taken at the first plain read, after
// the lock. Writers that do not lock the sale (PayOrder, CancelOrder,
// UpdateRestore) touch only rows that are read with a lock here (the
// order) or whose staleness is harmless (a request's attempts).

// stateRank orders restore states: a request only ever moves forward.
var stateRank = map[seckill.RestoreState]int{
	seckill.RestoreStateParked:       0,
	seckill.RestoreStateRedisPending: 1,
	seckill.RestoreStateDone:         2,
}

// RestoreOrder runs the database step of a restore in one transaction, as
// restore.Store says:
//
//   - an order still ordered is cancelled with reason (cut to 2000 bytes
//     of valid UTF-8), its qty goes back to the sale's stock (version + 1)
//     and its request is recorded as redis_pending (an existing request
//     moves back to redis_pending with this reason); changed is true;
//   - an order already cancelled is returned unchanged with changed false;
//     only a missing request is recorded, as redis_pending;
//   - a paid order is ESTATECONFLICT, and nothing is written;
//   - a reservation with no order but a failed order gets a request
//     recorded as redis_pending, with changed true and o nil; when it
//     already has one, nothing is written and changed is false;
//   - a reservation with neither, an id that is not a well-formed
//     reservation id, or one of a sale the database does not know, is
//     ErrNotFound, and nothing is written.
//
// Giving the units back must keep the sale's stock at most what was put
// on sale: if it would not, the units were given back before (a bug), and
// the call fails, writing nothing, instead of clamping.
//
// Like PersistReservations, a transaction that loses to a concurrent
// writer is tried again from the start.
func (st *RestoreStore) RestoreOrder(ctx context.Context, reservationID, reason string, now time.Time) (*seckill.Order, bool, error) {
	saleID, ok := seckill.SaleIDOfReservation(reservationID)
	if !ok {
		return nil, false, fmt.Errorf("restore order of reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	var (
		o       *seckill.Order
		changed bool
	)
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		stock, initial, err := st.lockSale(ctx, tx, saleID)
		if err != nil {
			return err
		}
		var found bool
		o, changed, found, err = st.restoreLocked(ctx, tx, saleID, reservationID, reason, toMillis(now), stock, initial)
		if err == nil && !found {
			err = seckill.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("restore order of reservation %s: %w", reservationID, st.db.classify(err))
	}
	return o, changed, nil
}

// ParkRestore records a restore of a reservation that has no order yet
// as parked, with Attempts 0 and CreatedAt = UpdatedAt = now (cut to the
// millisecond). A request that exists already is returned unchanged.
//
// It bumps the sale's version in the same transaction, as
// RecordFailedOrder does: a PersistReservations that read the sale before
// this commit fails its optimistic update, retries and sees the parked
// request, so its order is created cancelled.
//
// A reservation whose order (or failed order) landed after the caller's
// RestoreOrder found none is restored here instead, exactly as
// RestoreOrder would, in the same transaction: the request comes back
// redis_pending, or the call fails as RestoreOrder would (ESTATECONFLICT
// for a paid order). So an order can never stay payable with its restore
// parked, whichever commits first.
//
// reservationID must be a well-formed reservation id of saleID, else
// EINVALID; an unknown sale is ErrNotFound.
func (st *RestoreStore) ParkRestore(ctx context.Context, reservationID, saleID, reason string, now time.Time) (*seckill.RestoreRequest, error) {
	if sale, ok := seckill.SaleIDOfReservation(reservationID); !ok || sale != saleID {
		return nil, fmt.Errorf("park restore of reservation %q: %w", reservationID,
			seckill.Errorf(seckill.EINVALID, "%q is not a reservation id of sale %q", reservationID, saleID))
	}
	nowMs := toMillis(now)
	var r *seckill.RestoreRequest
	err := st.inRetriedTx(ctx, func(tx *sql.Tx) error {
		stock, initial, err := st.lockSale(ctx, tx, saleID)
		if err != nil {
			return err
		}
		if r, err = st.requestInTx(ctx, tx, reservationID); !errors.Is(err, seckill.ErrNotFound) {
			return err // nil: the existing request, unchanged
		}
		_, _, found, err := st.restoreLocked(ctx, tx, saleID, reservationID, reason, nowMs, stock, initial)
		if err != nil {
			return err
		} else if found {
			r, err = st.requestInTx(ctx, tx, reservationID)
			return err
		}
		if st.beforePark != nil {
			st.beforePark()
		}
		if _, err := tx.ExecContext(ctx, st.q.bumpSaleVersion, saleID); err != nil {
			return fmt.Errorf("bump sale version: %w", err)
		}
		r = &seckill.RestoreRequest{
			ReservationID: reservationID,
			SaleID:        saleID,
			Reason:        storableText(reason, maxReasonBytes),
			State:         seckill.RestoreStateParked,
			CreatedAt:     fromMillis(nowMs),
			UpdatedAt:     fromMillis(nowMs),
		}
		return st.insertRequest(ctx, tx, r)
	})
	if err != nil {
		return nil, fmt.Errorf("park restore of reservation %s: %w", reservationID, st.db.classify(err))
	}
	return r, nil
}

// lockSale locks the sale's row for the rest of tx and returns its stock
// and initial stock; ErrNotFound when there is no such sale.
func (st *RestoreStore) lockSale(ctx context.Context, tx *sql.Tx, saleID string) (stock, initial int64, err error) {
	err = tx.QueryRowContext(ctx, st.rq.lockSale, saleID).Scan(&stock, &initial)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("sale %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return 0, 0, fmt.Errorf("lock sale %s: %w", saleID, err)
	}
	return stock, initial, nil
}

// restoreLocked is the database step of RestoreOrder in tx, which holds
// the sale's row lock (lockSale: stock and initial are what it read).
// found is false when the reservation has neither an order nor a failed
// order; then nothing was written.
func (st *RestoreStore) restoreLocked(ctx context.Context, tx *sql.Tx, saleID, reservationID, reason string, nowMs, stock, initial int64) (o *seckill.Order, changed, found bool, err error) {
	reason = storableText(reason, maxReasonBytes)
	o, err = scanOrder(tx.QueryRowContext(ctx, st.rq.orderForUpdate, reservationID))
	if errors.Is(err, sql.ErrNoRows) {
		has, err := st.existing(ctx, tx, []string{reservationID})
		if err != nil {
			return nil, false, false, fmt.Errorf("find failed order: %w", err)
		} else if !has[reservationID] {
			return nil, false, false, nil
		}
		// A failed order: the database never took its stock, so only
		// the Redis step is left.
		inserted, err := st.ensureRequest(ctx, tx, saleID, reservationID, reason, nowMs)
		return nil, inserted, true, err
	} else if err != nil {
		return nil, false, false, fmt.Errorf("read order: %w", err)
	}

	switch o.Status {
	case seckill.OrderPlaced:
	case seckill.OrderCancelled, seckill.OrderRefundDue, seckill.OrderRefunded:
		// Cancelled already (refund_due and refunded were cancelled
		// before the payment came): its units went back.
		_, err := st.ensureRequest(ctx, tx, saleID, reservationID, reason, nowMs)
		return o, false, true, err
	case seckill.OrderPaid:
		return nil, false, true, seckill.Errorf(seckill.ESTATECONFLICT, "order is paid")
	default:
		return nil, false, true, fmt.Errorf("order has unknown status %q", o.Status)
	}

	if stock > initial-o.Qty {
		return nil, false, true, fmt.Errorf("return %d units to sale %s: its stock %d would exceed the %d put on sale: the units were returned before (a bug)",
			o.Qty, saleID, stock, initial)
	}
	res, err := tx.ExecContext(ctx, st.q.cancelOrder,
		string(seckill.OrderCancelled), reason, nowMs, reservationID, string(seckill.OrderPlaced))
	if err != nil {
		return nil, false, true, fmt.Errorf("cancel order: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, true, fmt.Errorf("cancel order: %w", err)
	} else if n != 1 {
		// The row is locked: only a database that ignored the lock gets here.
		return nil, false, true, fmt.Errorf("cancel order: the order changed under its lock: %w", errConflict)
	}
	res, err = tx.ExecContext(ctx, st.rq.returnStock, o.Qty, nowMs, saleID, o.Qty)
	if err != nil {
		return nil, false, true, fmt.Errorf("return stock: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, true, fmt.Errorf("return stock: %w", err)
	} else if n != 1 {
		return nil, false, true, fmt.Errorf("return %d units to sale %s: its stock would exceed what was put on sale (a bug)", o.Qty, saleID)
	}
	if err := st.reopenRequest(ctx, tx, saleID, reservationID, reason, nowMs); err != nil {
		return nil, false, true, err
	}
	o.Status, o.CancelReason, o.UpdatedAt = seckill.OrderCancelled, reason, fromMillis(nowMs)
	if err := st.db.insertOrderEvents(ctx, tx, seckill.NewOrderEvent(seckill.EventOrderCancelled, o, o.UpdatedAt)); err != nil {
		return nil, false, true, err
	}
	return o, true, true, nil
}

// ensureRequest records a redis_pending request for a reservation that
// has none, reporting whether it did.
func (st *RestoreStore) ensureRequest(ctx context.Context, tx *sql.Tx, saleID, reservationID, reason string, nowMs int64) (bool, error) {
	if _, err := st.requestInTx(ctx, tx, reservationID); err == nil {
		return false, nil
	} else if !errors.Is(err, seckill.ErrNotFound) {
		return false, err
	}
	return true, st.insertRequest(ctx, tx, pendingRequest(saleID, reservationID, reason, nowMs))
}

// reopenRequest records a reservation's request as redis_pending with
// reason, whether or not it had one.
func (st *RestoreStore) reopenRequest(ctx context.Context, tx *sql.Tx, saleID, reservationID, reason string, nowMs int64) error {
	res, err := tx.ExecContext(ctx, st.rq.reopenRequest, string(seckill.RestoreStateRedisPending), reason, nowMs, reservationID)
	if err != nil {
		return fmt.Errorf("update restore request: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update restore request: %w", err)
	} else if n == 1 {
		return nil
	}
	return st.insertRequest(ctx, tx, pendingRequest(saleID, reservationID, reason, nowMs))
}

func pendingRequest(saleID, reservationID, reason string, nowMs int64) *seckill.RestoreRequest {
	return &seckill.RestoreRequest{
		ReservationID: reservationID,
		SaleID:        saleID,
		Reason:        reason,
		State:         seckill.RestoreStateRedisPending,
		CreatedAt:     fromMillis(nowMs),
		UpdatedAt:     fromMillis(nowMs),
	}
}

// insertRequest inserts r, whose text is storable already. A unique
// violation (a concurrent writer recorded it first) is a conflict: the
// transaction is tried again and finds it.
func (st *RestoreStore) insertRequest(ctx context.Context, tx *sql.Tx, r *seckill.RestoreRequest) error {
	var alerted any // NULL when zero
	if !r.AlertedAt.IsZero() {
		alerted = toMillis(r.AlertedAt)
	}
	_, err := tx.ExecContext(ctx, st.rq.insertRequest, r.ReservationID, r.SaleID, r.Reason, string(r.State),
		int64(r.Attempts), r.LastError, alerted, toMillis(r.CreatedAt), toMillis(r.UpdatedAt))
	if err != nil {
		return st.conflictOr(err, "insert restore request")
	}
	return nil
}

// requestInTx reads a request inside tx; ErrNotFound when none.
func (st *RestoreStore) requestInTx(ctx context.Context, tx *sql.Tx, reservationID string) (*seckill.RestoreRequest, error) {
	r, err := scanRestoreRequest(tx.QueryRowContext(ctx, st.rq.request, reservationID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.ErrNotFound
	} else if err != nil {
		return nil, fmt.Errorf("read restore request: %w", err)
	}
	return r, nil
}

// RestoreRequest returns the restore request of a reservation;
// ErrNotFound when none.
func (st *RestoreStore) RestoreRequest(ctx context.Context, reservationID string) (*seckill.RestoreRequest, error) {
	return byReservation(ctx, st.orderDB, "restore request", validReservationID, scanRestoreRequest, st.rq.request, reservationID)
}

// RestoreRequests lists up to limit requests in state, oldest first (by
// CreatedAt, then reservation id). An unknown state or a limit below 1 is
// EINVALID.
func (st *RestoreStore) RestoreRequests(ctx context.Context, state seckill.RestoreState, limit int) ([]*seckill.RestoreRequest, error) {
	if _, ok := stateRank[state]; !ok {
		return nil, fmt.Errorf("restore requests: %w", seckill.Errorf(seckill.EINVALID, "unknown restore state %q", state))
	}
	if limit < 1 {
		return nil, fmt.Errorf("restore requests: %w", seckill.Errorf(seckill.EINVALID, "limit must be positive, got %d", limit))
	}
	rs, err := queryAll(ctx, &st.reads, scanRestoreRequest, st.rq.requestsByState, string(state), limit)
	if err != nil {
		return nil, fmt.Errorf("restore requests %s: %w", state, st.db.classify(err))
	}
	return rs, nil
}

// UpdateRestore records an attempt on a request, as restore.Store
// says: state, LastError = lastErr (cut to 2000 bytes of valid UTF-8),
// Attempts + 1, UpdatedAt = now, and AlertedAt = now if alerted and not
// alerted before. A request never moves backward (parked, redis_pending,
// done): a step that is done is never undone, so such an update is
// ESTATECONFLICT and changes nothing. An unknown state is EINVALID; an
// unknown reservation ErrNotFound.
func (st *RestoreStore) UpdateRestore(ctx context.Context, reservationID string, state seckill.RestoreState, lastErr string, alerted bool, now time.Time) error {
	rank, ok := stateRank[state]
	if !ok {
		return fmt.Errorf("update restore of reservation %s: %w", reservationID,
			seckill.Errorf(seckill.EINVALID, "unknown restore state %q", state))
	}
	if !validReservationID(reservationID) {
		return fmt.Errorf("update restore of reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	// The states it may move from: its own and those before it, padded
	// to the statement's three parameters.
	from := make([]any, 0, 3)
	for s, r := range stateRank {
		if r <= rank {
			from = append(from, string(s))
		}
	}
	for len(from) < 3 {
		from = append(from, string(state))
	}
	nowMs := toMillis(now)
	var alertedAt any // NULL: leaves alerted_at_ms as it is
	if alerted {
		alertedAt = nowMs
	}
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		args := append([]any{string(state), storableText(lastErr, maxReasonBytes), alertedAt, nowMs, reservationID}, from...)
		res, err := tx.ExecContext(ctx, st.rq.updateRequest, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		r, err := st.requestInTx(ctx, tx, reservationID)
		if err != nil {
			return err
		}
		return seckill.Errorf(seckill.ESTATECONFLICT, "restore request is %s: it cannot move back to %s", r.State, state)
	})
	if err != nil {
		return fmt.Errorf("update restore of reservation %s: %w", reservationID, st.db.classify(err))
	}
	return nil
}

// restoresOf returns the reasons of the restore requests, in any state,
// of those of ids that have one.
func (st *orderDB) restoresOf(ctx context.Context, tx *sql.Tx, ids []string) (map[string]string, error) {
	found := make(map[string]string)
	err := st.eachRowIn(ctx, tx, st.rq.requestsIn, ids, func(rows *sql.Rows) error {
		var id, reason string
		err := rows.Scan(&id, &reason)
		found[id] = reason
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// settleParked moves the parked requests of ids to redis_pending: their
// orders were just created cancelled (or rejected), taking no stock.
// Requests in a later state stay as they are.
func (st *orderDB) settleParked(ctx context.Context, tx *sql.Tx, ids []string, nowMs int64) error {
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		args := make([]any, 0, 3+len(chunk))
		args = append(args, string(seckill.RestoreStateRedisPending), nowMs, string(seckill.RestoreStateParked))
		for _, id := range chunk {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, st.rq.settleParked+st.q.list(4, len(chunk)), args...); err != nil {
			return err
		}
	}
	return nil
}
