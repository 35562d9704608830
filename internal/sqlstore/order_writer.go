package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
)

// OrderWriter is the order writer's side of the order store: it turns
// reservation events into orders (PersistReservations) and records failed
// orders.
type OrderWriter struct {
	*orderDB
	// prepMu guards preparedA: whether prepareAll has prepared the
	// writer's statements (into orderDB.stmts).
	prepMu    sync.Mutex
	preparedA bool
	// held is what each buyer holds in the sales this writer persists,
	// so that a batch need not read it (holdings.go).
	held holdings
	// listing holds the sales whose batch reads list the batch's ids
	// (saleID → true): saleState found failed orders or restore requests
	// in them, which stay.
	listing sync.Map
	// lockAfter is how many attempts a PersistReservations call makes
	// optimistically; the attempts after those lock the sale's row first
	// (persist).
	lockAfter int
	// conflicts counts PersistReservations transactions rolled back
	// because they lost to a concurrent writer (Conflicts).
	conflicts atomic.Int64
	// beforeTakeStock, when set (by tests), runs in every attempt of
	// PersistReservations after its reads and before its stock update:
	// the window in which a concurrent writer can invalidate the reads.
	beforeTakeStock func(attempt int)
	// afterTakeStock, when set (SetAfterTakeStock), runs in every
	// attempt right after the stock update, while the transaction holds
	// the sale's row lock.
	afterTakeStock func()
}

// Ping checks that the database answers. The order writer uses it to tell
// an outage (wait, spend no attempt) from a bad batch.
func (st *OrderWriter) Ping(ctx context.Context) error { return st.db.Ping(ctx) }

const (
	// persistAttempts and persistMaxBackoff bound the retries of a
	// PersistReservations call that loses to concurrent writers: under
	// 0.8s of pauses in all. Each round has a winner, but not always the
	// same loser's turn: a writer that won goes on with its next batch at
	// once while the loser pauses, and under load four writers of one sale
	// starved one of them for 20 rounds. So after persistLockAfter lost
	// rounds a call locks the sale's row before it reads, and waits its
	// turn behind the writers holding it instead of racing them again
	// (persist). Losing every round after that means something else is
	// wrong (a deadlock each time), and the caller's own retries take over.
	persistAttempts   = 20
	persistMaxBackoff = 50 * time.Millisecond
	persistLockAfter  = 2

	// idChunk and insertChunk keep statements well under every dialect's
	// limit on bind parameters (SQLite 32766, MySQL and PostgreSQL 65535):
	// 500 ids per IN list (four lists in the writer's read: 2050
	// parameters), 200 rows (at most 11 columns) per INSERT. New orders,
	// the bulk of the writer's work, go up to placedChunk rows (5632
	// parameters) per INSERT, in runs of placedStep rows, so that a batch
	// of any size up to placedChunk takes at most six statements, and
	// typically two or three.
	idChunk     = 500
	insertChunk = 200
	placedChunk = 512
	placedStep  = 32

	// maxReasonBytes bounds stored reasons (cancel reasons, failure
	// reasons). Longer ones are cut: a reason is a diagnostic, and
	// refusing to store a cancel or a failed order over its length would
	// lose far more than its tail.
	maxReasonBytes = 2000
	// maxFailedTextBytes bounds the ids of a failed order (MySQL
	// VARCHAR(255)).
	maxFailedTextBytes = 255
)

// errRecheck marks an attempt of PersistReservations that did not read
// which events already have orders and found it needed to (persist): it
// wrote nothing, and is tried again at once, reading them.
var errRecheck = errors.New("an event may already have its order")

// batchReadsText is q.batchReadsOf(n, withOrders, withHeld), built once.
func (st *OrderWriter) batchReadsText(n int, withOrders, withHeld bool) string {
	k := textKey{rows: n, withOrders: withOrders, withHeld: withHeld}
	if t, ok := st.texts.Load(k); ok {
		return t.(string)
	}
	t := st.q.batchReadsOf(n, withOrders, withHeld)
	st.texts.Store(k, t)
	return t
}

// PersistReservations turns events of one sale into orders in one
// transaction, each event's outcome decided by seckill.DecidePersist over
// what the database holds. Rejected and over-limit events go to
// failed_orders (one attempt, the event as payload). An order whose restore
// was parked is created cancelled, and a parked request moves to
// redis_pending in the same transaction (for a rejected event too), so no
// buyer can pay an order whose restore was asked for.
//
// The stock is taken with an optimistic-lock update of the sale row (a
// ParkRestore bumps its version too, so a park after the reads is seen). A
// try that loses a race is rolled back and redone from its reads, in a new
// transaction (REPEATABLE READ would show the old snapshot), up to 20
// times with jittered pauses; from the third try on the row is locked
// before the reads, so a writer cannot be starved.
//
// Orders get CreatedAt = UpdatedAt = now and PayBy = now+payTimeout, cut to
// the millisecond. An unknown sale is ErrNotFound; an event not of saleID
// fails the call with EINVALID, writing nothing.
func (st *OrderWriter) PersistReservations(ctx context.Context, saleID string, events []seckill.ReservationEvent, now time.Time, payTimeout time.Duration) ([]seckill.PersistOutcome, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("persist reservations of sale %q: %w", saleID, seckill.ErrNotFound)
	}
	if payTimeout <= 0 {
		return nil, fmt.Errorf("persist reservations of sale %s: %w", saleID,
			seckill.Errorf(seckill.EINVALID, "pay timeout must be positive, got %s", payTimeout))
	}
	for i, e := range events {
		// The writer parsed the events at the broker edge; here only
		// their shape is checked, as an invariant.
		if !seckill.IsReservationOf(e.ReservationID, saleID) || e.SaleID != saleID {
			return nil, fmt.Errorf("persist reservations of sale %s: %w", saleID,
				seckill.Errorf(seckill.EINVALID, "event %d (reservation %q, sale %q) is not a reservation of sale %s",
					i, e.ReservationID, e.SaleID, saleID))
		}
	}
	if len(events) == 0 {
		return []seckill.PersistOutcome{}, nil
	}

	st.prepareAll(ctx)
	var err error
	readOrders := false // see persist
	for attempt := 1; attempt <= st.maxAttempts; attempt++ {
		if attempt > 1 {
			if serr := st.pause(ctx, attempt); serr != nil {
				return nil, fmt.Errorf("persist reservations of sale %s: %w (after: %w)", saleID, serr, err)
			}
		}
		var outcomes []seckill.PersistOutcome
		lock := attempt > st.lockAfter
		outcomes, err = st.persist(ctx, attempt, lock, readOrders, saleID, events, now, payTimeout)
		if errors.Is(err, errRecheck) && !readOrders {
			// Not a lost race: try again at once, this time reading
			// which events already have orders.
			readOrders = true
			outcomes, err = st.persist(ctx, attempt, lock, readOrders, saleID, events, now, payTimeout)
		}
		if err == nil {
			return outcomes, nil
		} else if !errors.Is(err, errConflict) {
			return nil, fmt.Errorf("persist reservations of sale %s: %w", saleID, st.db.classify(err))
		}
		st.conflicts.Add(1)
	}
	return nil, fmt.Errorf("persist reservations of sale %s: gave up after %d attempts: %w", saleID, st.maxAttempts, st.db.classify(err))
}

// SetAfterTakeStock makes every PersistReservations transaction call f
// right after its stock update, while it holds the sale's row lock: a
// test hook, for catching a writer inside its transaction on purpose.
// Call it before the store is used.
func (st *OrderWriter) SetAfterTakeStock(f func()) { st.afterTakeStock = f }

// Conflicts is the number of PersistReservations transactions rolled back
// so far because they lost to a concurrent writer (the sale's version
// moved, the same reservation inserted, a deadlock) and were tried again.
func (st *OrderWriter) Conflicts() int64 { return st.conflicts.Load() }

// persist is one attempt of PersistReservations: one transaction.
//
// Unless readOrders is set, it does not read which of the events already
// have an order: a redelivered event is rare, and the lookup is one of the
// batch read's three by reservation id (the other two, of failed orders
// and restore requests, are skipped by the database itself when the sale
// has none: batchReadsOf). The orders table's key on reservation_id stands
// in for it: inserting an order whose reservation has one fails the
// statement, and persist gives up with errRecheck. What the key cannot
// catch is a rejection (a failed order needs no order row to be
// inserted, and a redelivered event may be refused only because its own
// order holds the stock or the limit), so an attempt that would reject
// an event gives up with errRecheck before it writes anything. Either way
// the caller tries again at once with readOrders (the same attempt, as
// far as beforeTakeStock is told). Failed orders and restore requests are
// always looked up: an order for a reservation that has either would
// break no key.
//
// With lock, the attempt first locks the sale's row (restoreQueries.
// lockSale), so no other writer can move the version between its reads
// and its stock update: the reads that follow the lock see every commit
// before it, even under MySQL's REPEATABLE READ (see Locking in
// restore.go). The update still checks the version: the lock is there for
// a writer's turn, the stock's correctness never rests on it. On SQLite,
// whose writes take turns on the database's lock, there is nothing to
// lock.
func (st *OrderWriter) persist(ctx context.Context, attempt int, lock, readOrders bool, saleID string, events []seckill.ReservationEvent, now time.Time, payTimeout time.Duration) ([]seckill.PersistOutcome, error) {
	tx, err := st.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if lock && st.rq.lockSuffix != "" {
		var stock, initial int64
		// No row is no sale: the reads below say so.
		if err := tx.QueryRowContext(ctx, st.rq.lockSale, saleID).Scan(&stock, &initial); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, st.conflictOr(err, "lock the sale")
		}
	}

	r, err := st.readBatch(ctx, tx, saleID, events, readOrders)
	if err != nil {
		return nil, err
	}
	plan := seckill.DecidePersist(seckill.PersistSnapshot{Stock: r.stock, Limit: r.limit,
		Existing: r.existing, Restores: r.restores, Held: r.held}, events)
	nowMs := toMillis(now)
	outcomes, orders, failed, restored := planRows(plan, events, r.price, fromMillis(nowMs), fromMillis(toMillis(now.Add(payTimeout))))
	if len(orders) == 0 && len(failed) == 0 {
		return outcomes, nil // all duplicates: nothing to write
	}
	if len(failed) > 0 && !readOrders {
		return nil, fmt.Errorf("%d events to reject: %w", len(failed), errRecheck)
	}

	if st.beforeTakeStock != nil {
		st.beforeTakeStock(attempt)
	}
	// The stock update comes first, before the inserts: it locks the sale
	// row, so concurrent writers of the sale queue here, before they have
	// inserted anything they would have to undo, and find the version
	// moved when their turn comes. It runs even when every new event was
	// rejected (taking 0): the rejections rest on the stock read, which
	// must be as current as for a take.
	res, err := st.exec(ctx, tx, st.q.takeStock, plan.Taken, nowMs, saleID, r.version, plan.Taken)
	if err != nil {
		return nil, st.conflictOr(err, "take stock")
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("take stock: %w", err)
	} else if n != 1 {
		return nil, fmt.Errorf("take %d of stock at version %d: version moved: %w", plan.Taken, r.version, errConflict)
	}
	if st.afterTakeStock != nil {
		st.afterTakeStock()
	}
	if err := st.insertOrders(ctx, tx, orders); err != nil {
		if !readOrders && st.db.isUniqueViolation(err) {
			return nil, fmt.Errorf("insert orders: %w: %w", errRecheck, err)
		}
		return nil, st.conflictOr(err, "insert orders")
	}
	if err := st.insertFailedOrders(ctx, tx, failed); err != nil {
		return nil, st.conflictOr(err, "insert failed orders")
	}
	if err := st.settleParked(ctx, tx, restored, nowMs); err != nil {
		return nil, st.conflictOr(err, "settle parked restores")
	}
	if st.db.orderEvents {
		if err := st.insertOrderEvents(ctx, tx, persistedEvents(orders, failed, r.price, r.currency)...); err != nil {
			return nil, st.conflictOr(err, "record order events")
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, st.conflictOr(err, "commit")
	}
	st.held.committed(saleID, r.version, orders)
	return outcomes, nil
}

// readBatch reads what persist decides on. What the batch's buyers hold
// comes from the store's holdings when they are known at the version read
// (holdings.go), and from the database otherwise, or when readOrders: a
// recheck reads everything, and drops the holdings, which may have
// counted too much.
func (st *OrderWriter) readBatch(ctx context.Context, tx *sql.Tx, saleID string, events []seckill.ReservationEvent, readOrders bool) (*batchRows, error) {
	ids, users := batchKeys(events)
	if readOrders {
		st.held.drop(saleID)
	} else if _, listing := st.listing.Load(saleID); !listing && st.held.known(saleID) {
		r, ok, err := st.saleState(ctx, tx, saleID, users)
		if err != nil {
			return nil, st.conflictOr(err, "read the sale")
		} else if ok {
			return r, nil
		}
	}
	kept := st.held.known(saleID)
	read := users
	if kept {
		read = nil
	}
	r, err := st.batchReads(ctx, tx, saleID, ids, read, readOrders)
	if err == nil && r.saleFound && kept {
		var ok bool
		if r.held, ok = st.held.at(saleID, r.version, users); !ok {
			r, err = st.batchReads(ctx, tx, saleID, ids, users, readOrders)
		}
	}
	if err != nil {
		return nil, st.conflictOr(err, "read the sale and the batch's rows")
	}
	if !r.saleFound {
		return nil, fmt.Errorf("sale %s: %w", saleID, seckill.ErrNotFound)
	}
	return r, nil
}

// saleState is the batch read of the common case: the store knows what
// the batch's buyers hold (holdings.go), and the sale has no failed order
// and no restore request, so none of the batch's reservations can have
// either, and the lists of their ids that batchReads sends (two IN lists
// of up to 512 parameters, which the server parses and sorts at every
// execution) would find nothing. It reads the sale's row and those two
// facts in one statement; ok is false, with nothing read that counts, when
// the sale is not found, has either (then its later batches skip this
// read: such rows are not deleted), or its holdings are not kept at the
// version read (then they are dropped): readBatch then reads everything,
// in the same transaction. A failed order or a restore request added
// after this read moves the sale's version (RecordFailedOrder, a parked
// restore, another writer's batch), so the stock update fails and the
// batch is read again, as it does after batchReads.
func (st *OrderWriter) saleState(ctx context.Context, tx *sql.Tx, saleID string, users []string) (r *batchRows, ok bool, err error) {
	r = &batchRows{saleFound: true, existing: map[string]bool{}, restores: map[string]string{}}
	var failed, restores bool
	rows, err := st.query(ctx, tx, st.q.saleState, saleID, saleID, saleID)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, rows.Err()
	}
	if err := rows.Scan(&r.stock, &r.version, &r.price, &r.limit, &r.currency, &failed, &restores); err != nil {
		return nil, false, err
	}
	if err := rows.Close(); err != nil {
		return nil, false, err
	}
	if failed || restores {
		st.listing.Store(saleID, true)
		return nil, false, nil
	}
	if r.held, ok = st.held.at(saleID, r.version, users); !ok {
		return nil, false, nil
	}
	return r, true, nil
}

// persistedEvents are the events of a persisted batch: order.created for
// each new order (then order.cancelled for one created cancelled, its
// restore asked for before it landed) and order.failed for each
// rejection, all at the orders' creation.
func persistedEvents(orders []*seckill.Order, failed []*seckill.FailedOrder, price int64, currency string) []seckill.OrderEvent {
	events := make([]seckill.OrderEvent, 0, len(orders)+len(failed))
	for _, o := range orders {
		e := seckill.NewOrderEvent(seckill.EventOrderCreated, o, o.CreatedAt)
		e.Currency = currency
		events = append(events, e)
		if o.Status == seckill.OrderCancelled {
			e := seckill.NewOrderEvent(seckill.EventOrderCancelled, o, o.CreatedAt)
			e.Currency = currency
			events = append(events, e)
		}
	}
	for _, f := range failed {
		e := seckill.FailedOrderEvent(f, amountOf(f.Qty, price), f.CreatedAt)
		e.Currency = currency
		events = append(events, e)
	}
	return events
}

// batchKeys lists the distinct reservation ids of events, and their
// distinct valid buyers (an invalid user id is rejected anyway, and may
// not even be text the database accepts as a bind parameter).
func batchKeys(events []seckill.ReservationEvent) (ids, users []string) {
	ids = make([]string, 0, len(events))
	seen := make(map[string]bool, len(events))
	for _, e := range events {
		if !seen[e.ReservationID] {
			seen[e.ReservationID] = true
			ids = append(ids, e.ReservationID)
		}
	}
	seenUser := make(map[string]bool, len(events))
	for _, e := range events {
		if !seenUser[e.UserID] && seckill.ValidUserID(e.UserID) {
			seenUser[e.UserID] = true
			users = append(users, e.UserID)
		}
	}
	return ids, users
}

// planRows turns plan into the rows it writes, all created at now: the
// outcome of each event, the new orders, the failed orders and the
// reservations whose restore requests settle.
func planRows(plan seckill.PersistPlan, events []seckill.ReservationEvent, price int64, now, payBy time.Time) (
	outcomes []seckill.PersistOutcome, orders []*seckill.Order, failed []*seckill.FailedOrder, restored []string) {
	outcomes = make([]seckill.PersistOutcome, len(events))
	for i, d := range plan.Decisions {
		e := events[i]
		outcomes[i] = d.Outcome
		if d.Restored {
			restored = append(restored, e.ReservationID)
		}
		switch d.Outcome {
		case seckill.PersistCreated:
			orders = append(orders, &seckill.Order{
				ID: seckill.OrderIDOf(e.ReservationID), ReservationID: e.ReservationID, SaleID: e.SaleID,
				UserID: e.UserID, Qty: e.Qty, AmountCents: e.Qty * price, Status: d.Status, PayBy: payBy,
				ReservedAt: fromMillis(toMillis(e.ReservedAt)), CreatedAt: now, UpdatedAt: now, CancelReason: d.CancelReason,
				KeyDigest: keyDigestOf(e),
			})
		case seckill.PersistRejected, seckill.PersistOverLimit:
			failed = append(failed, rejectedEvent(e, d.Reason, now))
		}
	}
	return outcomes, orders, failed, restored
}

// rejectedEvent is the failed order of an event the database refused.
func rejectedEvent(e seckill.ReservationEvent, reason string, at time.Time) *seckill.FailedOrder {
	f := &seckill.FailedOrder{
		ReservationID: e.ReservationID,
		SaleID:        e.SaleID,
		UserID:        e.UserID,
		Qty:           e.Qty,
		Reason:        reason,
		Attempts:      1,
		CreatedAt:     at,
	}
	if body, err := json.Marshal(e); err == nil {
		f.Payload = body
	}
	return f
}

// batchRows is what one attempt of PersistReservations reads before it
// decides: the sale's row, which reservations already have an order, a
// failed order or a restore request, and the units each buyer holds in
// orders of the sale that are not cancelled.
type batchRows struct {
	saleFound                    bool
	stock, version, price, limit int64
	currency                     string
	existing                     map[string]bool
	restores                     map[string]string
	held                         map[string]int64
}

// batchReads reads batchRows with one statement per idChunk ids
// (st.q.batchReadsOf): one round trip where five statements took five.
// Without withOrders it does not look for the ids' orders (persist says
// when that is safe), and existing holds only failed orders. All
// of a statement's parts read one snapshot; where each statement reads its
// own (PostgreSQL's READ COMMITTED), the sale's row comes from the first,
// so a writer that commits before a later one has moved the version read
// here, and the stock update notices. users are at most as many as ids.
func (st *OrderWriter) batchReads(ctx context.Context, tx *sql.Tx, saleID string, ids, users []string, withOrders bool) (*batchRows, error) {
	withHeld := len(users) > 0
	r := &batchRows{existing: map[string]bool{}, restores: map[string]string{}, held: map[string]int64{}}
	for start := 0; start < len(ids); start += idChunk {
		idc := ids[start:min(start+idChunk, len(ids))]
		var uc []string
		if start < len(users) {
			uc = users[start:min(start+idChunk, len(users))]
		}
		// Both lists padded to a power of two (an IN list does not mind
		// a value twice; a buyer named twice still matches each of their
		// orders once), so that few statement texts exist. No buyer has
		// the empty id, which pads a list with no buyer left.
		n := padLen(len(idc))
		args := make([]any, 0, 4+4*n)
		args = append(args, saleID)
		idList := func() {
			for i := range n {
				args = append(args, idc[min(i, len(idc)-1)])
			}
		}
		if withOrders {
			idList()
		}
		for range 2 { // failed orders, restore requests
			idList()
			args = append(args, saleID)
		}
		if withHeld {
			args = st.appendHeldArgs(args, saleID, uc, n)
		}
		rows, err := st.query(ctx, tx, st.batchReadsText(n, withOrders, withHeld), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				kind       int
				key, text  string
				a, b, c, d int64
			)
			if err := rows.Scan(&kind, &key, &a, &b, &c, &d, &text); err != nil {
				rows.Close()
				return nil, err
			}
			switch kind {
			case batchRowSale:
				if start == 0 {
					r.saleFound = true
					r.stock, r.version, r.price, r.limit, r.currency = a, b, c, d, text
				}
			case batchRowOrder, batchRowFailed:
				r.existing[key] = true
			case batchRowRestore:
				r.restores[key] = text
			case batchRowHeld:
				r.held[key] += a
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// appendHeldArgs appends the arguments of the batch read's part that
// sums what buyers hold (batchReadsOf): the sale, then the buyers as one
// array or as a list of n (padded with the last one, or with "", which is
// no buyer's id, when this chunk of ids has no buyer left).
func (st *OrderWriter) appendHeldArgs(args []any, saleID string, buyers []string, n int) []any {
	args = append(args, saleID)
	if st.q.heldByBuyer != "" {
		return append(args, buyers)
	}
	for i := range n {
		if len(buyers) == 0 {
			args = append(args, "")
		} else {
			args = append(args, buyers[min(i, len(buyers)-1)])
		}
	}
	return args
}

// The kinds of row of st.q.batchReads, in its first column.
const (
	batchRowSale = iota
	batchRowOrder
	batchRowFailed
	batchRowRestore
	batchRowHeld
)

// insertOrders inserts orders with multi-row INSERTs: those still ordered
// without a cancel reason (up to placedChunk rows each), the others with
// theirs (up to insertChunk).
func (st *orderDB) insertOrders(ctx context.Context, tx *sql.Tx, orders []*seckill.Order) error {
	var placed, cancelled []*seckill.Order
	for _, o := range orders {
		if o.Status == seckill.OrderPlaced {
			placed = append(placed, o)
		} else {
			cancelled = append(cancelled, o)
		}
	}
	if st.q.insertPlacedArrays != "" && sharedPlacement(placed) {
		if err := st.insertPlaced(ctx, tx, placed); err != nil {
			return err
		}
		placed = nil
	}
	for _, set := range []struct {
		orders []*seckill.Order
		head   string
		width  int
	}{
		{placed, st.q.insertOrders, orderInsertWidth},
		{cancelled, st.q.insertCancelledOrders, cancelledInsertWidth},
	} {
		for start, n := 0, 0; start < len(set.orders); start += n {
			n = runLen(len(set.orders)-start, insertChunk)
			if set.width == orderInsertWidth {
				n = placedRunLen(len(set.orders) - start)
			}
			chunk := set.orders[start : start+n]
			args := make([]any, 0, len(chunk)*set.width)
			for _, o := range chunk {
				args = append(args, o.ID, o.ReservationID, o.SaleID, o.UserID, o.Qty, o.AmountCents, string(o.Status),
					toMillis(o.PayBy), toMillis(o.ReservedAt), toMillis(o.CreatedAt), toMillis(o.UpdatedAt), keyDigestArg(o.KeyDigest))
				if set.width == cancelledInsertWidth {
					args = append(args, o.CancelReason)
				}
			}
			if _, err := st.exec(ctx, tx, st.tuplesText(set.head, len(chunk), set.width), args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharedPlacement reports whether orders (at least one) are all of one
// sale, pay-by, creation and update time, as a batch's new orders are.
func sharedPlacement(orders []*seckill.Order) bool {
	for _, o := range orders {
		if o.SaleID != orders[0].SaleID || !o.PayBy.Equal(orders[0].PayBy) ||
			!o.CreatedAt.Equal(orders[0].CreatedAt) || !o.UpdatedAt.Equal(orders[0].UpdatedAt) {
			return false
		}
	}
	return len(orders) > 0
}

// insertPlaced inserts new orders that share their placement
// (sharedPlacement) with st.q.insertPlacedArrays. The order ids are the
// database's ('o-' || reservation id, as the table's CHECK requires).
func (st *orderDB) insertPlaced(ctx context.Context, tx *sql.Tx, orders []*seckill.Order) error {
	var (
		rids, users, keys  = make([]string, len(orders)), make([]string, len(orders)), make([]string, len(orders))
		qty, amount, resAt = make([]int64, len(orders)), make([]int64, len(orders)), make([]int64, len(orders))
	)
	for i, o := range orders {
		rids[i], users[i], qty[i], amount[i], resAt[i] = o.ReservationID, o.UserID, o.Qty, o.AmountCents, toMillis(o.ReservedAt)
		keys[i] = o.KeyDigest // "" is NULL: the statement's NULLIF
	}
	first := orders[0]
	_, err := st.exec(ctx, tx, st.q.insertPlacedArrays, first.SaleID, toMillis(first.PayBy), toMillis(first.CreatedAt),
		toMillis(first.UpdatedAt), rids, users, qty, amount, resAt, keys)
	return err
}

// writerQueries lists every statement text PersistReservations runs.
func (st *OrderWriter) writerQueries() []string {
	qs := []string{st.q.takeStock, st.q.saleState}
	if st.q.insertPlacedArrays != "" {
		qs = append(qs, st.q.insertPlacedArrays)
	}
	for n := placedStep; n <= placedChunk; n += placedStep {
		qs = append(qs, st.q.insertOrders+st.q.tuples(n, orderInsertWidth))
	}
	for n := 1; n < placedStep; n *= 2 {
		qs = append(qs, st.q.insertOrders+st.q.tuples(n, orderInsertWidth))
	}
	for n := 1; n <= insertChunk; n *= 2 {
		qs = append(qs,
			st.q.insertCancelledOrders+st.q.tuples(n, cancelledInsertWidth),
			st.q.insertFailedOrders+st.q.tuples(n, failedOrderWidth))
	}
	for n := 1; n <= padLen(idChunk); n *= 2 {
		qs = append(qs, st.q.orderIDsIn+st.q.list(1, n), st.q.failedOrderIDsIn+st.q.list(1, n), st.rq.requestsIn+st.q.list(1, n),
			st.q.batchReadsOf(n, false, true), st.q.batchReadsOf(n, true, true),
			st.q.batchReadsOf(n, false, false), st.q.batchReadsOf(n, true, false))
	}
	return qs
}

// prepareAll prepares the writer's statements once, outside any
// transaction. If the database refuses (not migrated yet, down), the
// statements run unprepared and the next call tries again.
func (st *OrderWriter) prepareAll(ctx context.Context) {
	st.prepMu.Lock()
	defer st.prepMu.Unlock()
	if st.preparedA {
		return
	}
	for _, q := range append(st.writerQueries(), st.db.eventInsertTexts()...) {
		if _, ok := st.stmts.Load(q); ok {
			continue
		}
		s, err := st.db.write.PrepareContext(ctx, q)
		if err != nil {
			return
		}
		st.stmts.Store(q, s)
	}
	st.preparedA = true
}

// runLen is the length of the next run of a list of n rows inserted by one
// statement: the largest power of two that fits n and limit, so that the
// statements of every batch size are a few texts, each prepared once.
func runLen(n, limit int) int {
	r := 1
	for r*2 <= min(n, limit) {
		r *= 2
	}
	return r
}

// placedRunLen is the length of the next run of n new orders inserted by
// one statement: a multiple of placedStep up to placedChunk, or below
// placedStep a power of two.
func placedRunLen(n int) int {
	if n >= placedStep {
		return min(n, placedChunk) / placedStep * placedStep
	}
	return runLen(n, placedStep)
}

// padLen is n rounded up to a power of two.
func padLen(n int) int {
	r := 1
	for r < n {
		r *= 2
	}
	return r
}

// insertFailedOrders inserts failed orders, whose reservation ids are
// valid keys (validFailedKey), with multi-row INSERTs of up to
// insertChunk rows. Their other text is made storable here.
func (st *orderDB) insertFailedOrders(ctx context.Context, tx execer, failed []*seckill.FailedOrder) error {
	for start, n := 0, 0; start < len(failed); start += n {
		n = runLen(len(failed)-start, insertChunk)
		chunk := failed[start : start+n]
		args := make([]any, 0, len(chunk)*failedOrderWidth)
		for _, f := range chunk {
			var payload any // NULL when empty
			if len(f.Payload) > 0 {
				payload = f.Payload
			}
			args = append(args, f.ReservationID,
				storableText(f.SaleID, maxFailedTextBytes), storableText(f.UserID, maxFailedTextBytes),
				f.Qty, storableText(f.Reason, maxReasonBytes), int64(f.Attempts), payload, toMillis(f.CreatedAt))
		}
		query := st.tuplesText(st.q.insertFailedOrders, len(chunk), failedOrderWidth)
		var err error
		if t, ok := tx.(*sql.Tx); ok {
			_, err = st.exec(ctx, t, query, args...)
		} else {
			_, err = tx.ExecContext(ctx, query, args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// RecordFailedOrder stores f unless its reservation already has a failed
// order or an order (then ErrDuplicate, and nothing changes): one
// reservation never ends as both, so an operator never refunds a buyer who
// has an order. It bumps the sale's version in the same transaction, so a
// PersistReservations that read the sale before this commit fails its
// optimistic update, retries and sees the failed order. A parked restore
// request of the reservation moves to redis_pending in the same
// transaction (see RestoreOrder). A zero f.CreatedAt is stamped with the DB's clock; either way f.CreatedAt
// is set to the stored millisecond, in UTC. The reservation id may be any
// 1 to 255 bytes of UTF-8 without NUL (a dead letter's id need not be
// well-formed), else EINVALID. SaleID and UserID (which may be empty) are
// stored as at most 255 bytes and Reason as at most 2000 bytes of valid
// UTF-8, cut if longer: a failed order is never refused over its text.
func (st *OrderWriter) RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error {
	if !validFailedKey(f.ReservationID) {
		return fmt.Errorf("record failed order: %w", seckill.Errorf(seckill.EINVALID,
			"reservation id must be 1-%d bytes of UTF-8 without NUL", maxFailedTextBytes))
	}
	stored := *f
	if stored.CreatedAt.IsZero() {
		stored.CreatedAt = st.db.now()
	}
	stored.CreatedAt = fromMillis(toMillis(stored.CreatedAt))
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		if seckill.ValidSaleID(stored.SaleID) {
			if _, err := tx.ExecContext(ctx, st.q.bumpSaleVersion, stored.SaleID); err != nil {
				return err
			}
		}
		// Only a well-formed reservation id can have an order or a
		// restore request (and MySQL refuses to compare those tables'
		// ASCII ids with others).
		_, wellFormed := seckill.SaleIDOfReservation(stored.ReservationID)
		if wellFormed {
			found, err := st.existing(ctx, tx, []string{stored.ReservationID})
			if err != nil {
				return err
			} else if found[stored.ReservationID] {
				return seckill.ErrDuplicate
			}
		}
		if err := st.insertFailedOrders(ctx, tx, []*seckill.FailedOrder{&stored}); err != nil {
			return err
		}
		if err := st.db.insertOrderEvents(ctx, tx, seckill.FailedOrderEvent(&stored, -1, stored.CreatedAt)); err != nil || !wellFormed {
			return err
		}
		// A restore parked for the reservation will never see its order
		// land: the database took nothing, so only the Redis step is
		// left, as RestoreOrder records for a failed order.
		return st.settleParked(ctx, tx, []string{stored.ReservationID}, toMillis(st.db.now()))
	})
	if errors.Is(err, seckill.ErrDuplicate) || st.db.isUniqueViolation(err) {
		return fmt.Errorf("record failed order of reservation %s: %w", f.ReservationID, seckill.ErrDuplicate)
	} else if err != nil {
		return fmt.Errorf("record failed order of reservation %s: %w", f.ReservationID, st.db.classify(err))
	}
	f.CreatedAt = stored.CreatedAt
	return nil
}
