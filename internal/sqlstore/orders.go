package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// OrderStore is the seckill.OrderStore of a DB: orders and failed orders,
// and the database's count of unsold stock that orders take from. It is
// also the DB's seckill.RestoreStore and seckill.LedgerStore (restore.go).
type OrderStore struct {
	db *DB
	q  *orderQueries
	rq *restoreQueries
	// stmts holds the writer's statements, prepared once (query text →
	// *sql.Stmt on the write pool) and used in each transaction through
	// Tx.StmtContext, which reuses a connection's prepared copy. The texts
	// are few (variable-length lists come in power-of-two sizes), so all
	// of them are prepared before the first transaction: preparing on the
	// pool while a transaction holds its only connection (SQLite) would
	// wait forever.
	stmts     sync.Map
	prepMu    sync.Mutex
	preparedA bool
	// texts memoises the statement texts built per batch (a head and
	// lists of bind parameters, textKey → string): the same few come
	// back every batch, and building them was a quarter of the writer's
	// CPU in the persistence benchmark's profile.
	texts sync.Map
	// held is what each buyer holds in the sales this store persists,
	// so that a batch need not read it (holdings.go).
	held holdings
	// reads is the read pool with its statements prepared once: the
	// restore retry pass lists restore requests after every batch the
	// writer persists, and parsing its two queries each time was 3.6 % of
	// the server's CPU in `seckill bench live`.
	reads preparedPool

	// maxAttempts bounds the transactions one PersistReservations call
	// tries while it loses to concurrent writers; maxBackoff caps the
	// jittered pause between them.
	maxAttempts int
	maxBackoff  time.Duration
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
	// beforePark, when set (by tests), runs in every attempt of
	// ParkRestore that found nothing to restore, after its reads and
	// before it parks: the window the sale's row lock keeps writers out of.
	beforePark func()
}

var _ seckill.OrderStore = (*OrderStore)(nil)

// NewOrderStore returns the order store of db, which must be migrated.
func NewOrderStore(db *DB) *OrderStore {
	return &OrderStore{
		db:          db,
		q:           db.dialect.orders,
		rq:          db.dialect.restores,
		reads:       preparedPool{db: db.read},
		maxAttempts: persistAttempts,
		maxBackoff:  persistMaxBackoff,
		lockAfter:   persistLockAfter,
	}
}

// Ping checks that the database answers. The order writer uses it to tell
// an outage (wait, spend no attempt) from a bad batch.
func (st *OrderStore) Ping(ctx context.Context) error { return st.db.Ping(ctx) }

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

// errConflict marks a transaction that lost to a concurrent writer: the
// sale's version moved, a competing writer inserted the same reservation,
// or the database aborted the transaction (deadlock, serialization
// failure). The whole transaction is tried again.
var errConflict = errors.New("lost to a concurrent writer")

// errRecheck marks an attempt of PersistReservations that did not read
// which events already have orders and found it needed to (persist): it
// wrote nothing, and is tried again at once, reading them.
var errRecheck = errors.New("an event may already have its order")

// orderQueries is the order store's SQL text in one dialect. It lives
// beside the dialect's other SQL (sqlite.go, mysql.go, postgres.go).
// Statements ending in "IN " or "VALUES " are completed in Go with a list
// of bind parameters (see list and tuples).
type orderQueries struct {
	// bind returns the i-th (1-based) bind parameter: '?' or '$i'.
	bind func(i int) string
	// heldSum is the SQL of the units a buyer's orders hold, SUM(qty), as
	// a BIGINT (PostgreSQL's SUM of a BIGINT is a NUMERIC).
	heldSum string
	// heldByBuyer, when set, is the batch read's part that sums what
	// each buyer holds, taking the sale (%[1]s) and the buyers as one
	// array parameter (%[2]s), instead of an IN list (batchReadsOf).
	heldByBuyer string
	// isTransient recognises an error after which the database has rolled
	// the transaction back and trying it again may succeed (a deadlock, a
	// serialization failure).
	isTransient func(error) bool

	// orderIDsIn and failedOrderIDsIn select the reservation_id of the
	// orders (failed orders) whose reservation_id is IN a list.
	orderIDsIn       string
	failedOrderIDsIn string
	// bumpSaleVersion increments the version of sale $1, taking its row
	// lock and failing any optimistic update that read the old version.
	bumpSaleVersion string
	// takeStock takes $1 units of sale $3 at version $4 if it has $5 (= $1)
	// left, bumping the version and setting updated_at_ms to $2.
	takeStock string
	// insertOrders inserts rows of orderInsertColumns; insertFailedOrders
	// rows of failedOrderColumns.
	insertOrders       string
	insertFailedOrders string
	// insertPlacedArrays, when set, inserts new orders (status ordered)
	// of one sale, pay-by, creation and update time ($1-$4) from arrays of
	// their reservation ids, buyers, quantities, amounts and reservation
	// times ($5-$9): one statement of nine parameters for a whole batch
	// (insertPlaced).
	insertPlacedArrays string
	// insertCancelledOrders inserts rows of orderInsertColumns followed by
	// cancel_reason: orders whose restore was asked for before they landed.
	insertCancelledOrders string

	// order and failedOrder select one row by reservation_id ($1).
	order       string
	failedOrder string
	// payOrder sets status $1 and updated_at_ms $2 on reservation $3 if
	// its status is $4 and pay_by_ms > $5.
	payOrder string
	// cancelOrder sets status $1, cancel_reason $2, updated_at_ms $3 on
	// reservation $4 if its status is $5.
	cancelOrder string
	// expiredOrders selects up to $3 orders of status $1 with
	// pay_by_ms <= $2, oldest deadline first. No tie-break: the
	// (status, pay_by_ms) index gives that order and the scan stops at
	// the limit, where a second key would sort every expired order for
	// each batch (20,000 of them after a rush that nobody paid for).
	expiredOrders string
}

// orderColumns is the column list every order query selects, in
// scanOrder's order; orderInsertColumns is what an insert sets (a new
// order has no cancel reason). The same in every dialect.
const (
	orderColumns       = `id, reservation_id, sale_id, user_id, qty, amount_cents, status, pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason`
	orderInsertColumns = `id, reservation_id, sale_id, user_id, qty, amount_cents, status, pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, key_digest`
	orderInsertWidth   = 12
	// cancelledInsertWidth is orderInsertWidth plus cancel_reason.
	cancelledInsertWidth = orderInsertWidth + 1
	// failedOrderColumns is both what failed-order queries select, in
	// scanFailedOrder's order, and what an insert sets.
	failedOrderColumns = `reservation_id, sale_id, user_id, qty, reason, attempts, payload, created_at_ms`
	failedOrderWidth   = 8
	// failedOrderSelect is what failed-order queries select, in
	// scanFailedOrder's order: the columns above and the resolution.
	failedOrderSelect = failedOrderColumns + `, resolved_at_ms, resolution, resolution_note, resolved_by`
)

// qmarkOrderQueries is the order SQL of the dialects that bind with "?":
// SQLite and MySQL/MariaDB share its text and differ only in which errors
// are worth a retry.
func qmarkOrderQueries(isTransient func(error) bool) orderQueries {
	return orderQueries{
		bind:        func(int) string { return "?" },
		isTransient: isTransient,
		heldSum:     `SUM(qty)`,

		orderIDsIn:       `SELECT reservation_id FROM orders WHERE reservation_id IN `,
		failedOrderIDsIn: `SELECT reservation_id FROM failed_orders WHERE reservation_id IN `,
		bumpSaleVersion:  `UPDATE sales SET version = version + 1 WHERE id = ?`,
		takeStock: `UPDATE sales SET stock = stock - ?, version = version + 1, updated_at_ms = ?
			WHERE id = ? AND version = ? AND stock >= ?`,
		insertOrders:       `INSERT INTO orders (` + orderInsertColumns + `) VALUES `,
		insertFailedOrders: `INSERT INTO failed_orders (` + failedOrderColumns + `) VALUES `,

		insertCancelledOrders: `INSERT INTO orders (` + orderInsertColumns + `, cancel_reason) VALUES `,

		order:       `SELECT ` + orderColumns + ` FROM orders WHERE reservation_id = ?`,
		failedOrder: `SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id = ?`,
		payOrder: `UPDATE orders SET status = ?, updated_at_ms = ?
			WHERE reservation_id = ? AND status = ? AND pay_by_ms > ?`,
		cancelOrder: `UPDATE orders SET status = ?, cancel_reason = ?, updated_at_ms = ?
			WHERE reservation_id = ? AND status = ?`,
		expiredOrders: `SELECT ` + orderColumns + ` FROM orders
			WHERE status = ? AND pay_by_ms <= ?
			ORDER BY pay_by_ms LIMIT ?`,
	}
}

// list returns "(p, p, …)": n bind parameters numbered from first.
func (q *orderQueries) list(first, n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q.bind(first + i))
	}
	b.WriteByte(')')
	return b.String()
}

// textKey names a statement text: head followed by rows lists of width
// bind parameters, or (head "", width 0) the batch reads for lists of rows,
// with the lookup of orders or without.
type textKey struct {
	head        string
	rows, width int
	withOrders  bool
	withHeld    bool
}

// tuplesText is head + q.tuples(rows, width), built once.
func (st *OrderStore) tuplesText(head string, rows, width int) string {
	k := textKey{head: head, rows: rows, width: width}
	if t, ok := st.texts.Load(k); ok {
		return t.(string)
	}
	t := head + st.q.tuples(rows, width)
	st.texts.Store(k, t)
	return t
}

// batchReadsText is q.batchReadsOf(n, withOrders, withHeld), built once.
func (st *OrderStore) batchReadsText(n int, withOrders, withHeld bool) string {
	k := textKey{rows: n, withOrders: withOrders, withHeld: withHeld}
	if t, ok := st.texts.Load(k); ok {
		return t.(string)
	}
	t := st.q.batchReadsOf(n, withOrders, withHeld)
	st.texts.Store(k, t)
	return t
}

// tuples returns "(…), (…)": rows lists of width bind parameters each,
// numbered from 1.
func (q *orderQueries) tuples(rows, width int) string {
	var b strings.Builder
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q.list(1+r*width, width))
	}
	return b.String()
}

// PersistReservations turns events of one sale into orders in one
// transaction, as seckill.OrderStore says. In order, each event is:
//
//   - PersistDuplicate if its reservation already has an order or a failed
//     order, or appeared earlier in events;
//   - PersistCreated if its reservation has a restore request (parked,
//     because the restore was asked for before the order landed): its
//     order is created cancelled, with the request's reason as its cancel
//     reason, takes no stock, and a parked request moves to redis_pending
//     in the same transaction, so no buyer can ever pay an order whose
//     restore was asked for. (ParkRestore bumps the sale's version, so a
//     park that commits after this call's reads fails its optimistic
//     update and the retry sees it.) An invalid event (below) is rejected
//     all the same, and its parked request moves to redis_pending too, as
//     RestoreOrder does for a failed order;
//   - PersistOverLimit if the buyer's orders of the sale that are not
//     cancelled (with the events accepted before it) and its qty pass the
//     sale's per-user limit, and recorded in failed_orders (reason
//     seckill.ReasonOverLimit + ": …"): Redis may have forgotten what the
//     buyer holds, the database has not;
//   - PersistCreated if its qty fits in the stock the database has left
//     (after the events accepted before it);
//   - PersistRejected otherwise, and recorded in failed_orders (reason
//     "insufficient database stock: …", one attempt, the event as JSON for
//     payload); likewise an event whose user id or qty is invalid (reason
//     "invalid reservation event: …").
//
// The stock is taken with an optimistic-lock update of the sale row; a
// transaction that loses to a concurrent writer (version moved, the same
// reservation inserted, a deadlock) is rolled back and tried again from
// its reads, up to 20 times with short jittered pauses, from the third
// try on with the sale's row locked before the reads (so that a writer
// cannot be starved by others that keep winning). Each try is a new
// transaction: under MySQL's REPEATABLE READ, reads inside the old one
// would see the old snapshot again.
//
// Orders get CreatedAt = UpdatedAt = now and PayBy = now+payTimeout, all
// cut to the millisecond. An unknown sale is ErrNotFound. An event whose
// reservation id does not have the shape of an id of saleID, or whose SaleID is not
// saleID, is the caller's mistake: the call fails with EINVALID and writes
// nothing.
func (st *OrderStore) PersistReservations(ctx context.Context, saleID string, events []seckill.ReservationEvent, now time.Time, payTimeout time.Duration) ([]seckill.PersistOutcome, error) {
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
func (st *OrderStore) SetAfterTakeStock(f func()) { st.afterTakeStock = f }

// Conflicts is the number of PersistReservations transactions rolled back
// so far because they lost to a concurrent writer (the sale's version
// moved, the same reservation inserted, a deadlock) and were tried again.
func (st *OrderStore) Conflicts() int64 { return st.conflicts.Load() }

// pause waits before attempt (2, 3, …): a random time in [d/2, d], d
// doubling from 2ms up to maxBackoff, so that writers that collided spread
// out instead of colliding again.
func (st *OrderStore) pause(ctx context.Context, attempt int) error {
	d := min(st.maxBackoff, time.Millisecond<<min(attempt-1, 20))
	return startstop.Sleep(ctx, d/2+rand.N(d/2+1))
}

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
func (st *OrderStore) persist(ctx context.Context, attempt int, lock, readOrders bool, saleID string, events []seckill.ReservationEvent, now time.Time, payTimeout time.Duration) ([]seckill.PersistOutcome, error) {
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
func (st *OrderStore) readBatch(ctx context.Context, tx *sql.Tx, saleID string, events []seckill.ReservationEvent, readOrders bool) (*batchRows, error) {
	ids, users := batchKeys(events)
	if readOrders {
		st.held.drop(saleID)
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

// conflictOr wraps err with what, marking it errConflict when it is a
// unique violation (a concurrent writer inserted the same reservation
// first) or a transient abort.
func (st *OrderStore) conflictOr(err error, what string) error {
	if st.db.isUniqueViolation(err) || st.q.isTransient(err) {
		return fmt.Errorf("%s: %w: %w", what, errConflict, err)
	}
	return fmt.Errorf("%s: %w", what, err)
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
func (st *OrderStore) batchReads(ctx context.Context, tx *sql.Tx, saleID string, ids, users []string, withOrders bool) (*batchRows, error) {
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
func (st *OrderStore) appendHeldArgs(args []any, saleID string, buyers []string, n int) []any {
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

// batchReadsOf is the text of batchReads for lists of n: parameter 1 is
// the sale; then, withOrders, a list of the n reservation ids; then the
// same list and the sale again, twice; then the sale and n buyers. Each
// row is (kind, key, a, b, c, d, text): the sale's stock, version, price,
// limit and currency; a reservation with an order or a failed order; a restore
// request and its reason; a buyer and the units of their orders not
// cancelled. The sum is the database's: a buyer who bought again and again
// (the limit allows) is one row, not one per order, which in a rush that
// sells 100,000 units to 10,000 buyers was most of the rows read.
//
// The failed orders and restore requests are looked up only if the sale
// has any: in a rush it has none, and the test, one seek of an index on
// sale_id made once per statement (it names no row of the outer query),
// saves a seek per id in each table.
func (q *orderQueries) batchReadsOf(n int, withOrders, withHeld bool) string {
	var b strings.Builder
	p := 1
	next := func() string { p++; return q.bind(p - 1) }
	list := func() string { l := q.list(p, n); p += n; return l }
	b.WriteString(`SELECT 0, id, stock, version, price_cents, per_user_limit, currency FROM sales WHERE id = ` + next())
	if withOrders {
		b.WriteString(` UNION ALL SELECT 1, reservation_id, 0, 0, 0, 0, '' FROM orders WHERE reservation_id IN ` + list())
	}
	b.WriteString(` UNION ALL SELECT 2, reservation_id, 0, 0, 0, 0, '' FROM failed_orders WHERE reservation_id IN ` + list() +
		` AND EXISTS (SELECT 1 FROM failed_orders WHERE sale_id = ` + next() + `)`)
	b.WriteString(` UNION ALL SELECT 3, reservation_id, 0, 0, 0, 0, reason FROM restore_requests WHERE reservation_id IN ` + list() +
		` AND EXISTS (SELECT 1 FROM restore_requests WHERE sale_id = ` + next() + `)`)
	if !withHeld {
		return b.String()
	}
	if q.heldByBuyer != "" {
		sale := next()
		b.WriteString(` UNION ALL ` + fmt.Sprintf(q.heldByBuyer, sale, next()))
		return b.String()
	}
	b.WriteString(` UNION ALL SELECT 4, user_id, ` + q.heldSum + `, 0, 0, 0, '' FROM orders WHERE sale_id = ` + next())
	b.WriteString(` AND status NOT IN ('cancelled', 'refund_due', 'refunded') AND user_id IN ` + list() + ` GROUP BY user_id`)
	return b.String()
}

// existing returns which of ids already have an order or a failed order.
func (st *OrderStore) existing(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
	found := make(map[string]bool)
	for _, head := range []string{st.q.orderIDsIn, st.q.failedOrderIDsIn} {
		err := st.eachRowIn(ctx, tx, head, ids, func(rows *sql.Rows) error {
			var id string
			err := rows.Scan(&id)
			found[id] = true
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// eachRowIn runs head + "(ids…)" with the ids in chunks of idChunk (the
// dialects' placeholder limits) and calls scan on every row.
func (st *OrderStore) eachRowIn(ctx context.Context, tx *sql.Tx, head string, ids []string, scan func(*sql.Rows) error, tail ...string) error {
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		// Padded to a power of two with the last id again (an IN list
		// does not mind), so that few statement texts exist.
		args := make([]any, padLen(len(chunk)))
		for i := range args {
			args[i] = chunk[min(i, len(chunk)-1)]
		}
		query := st.tuplesText(head, 1, len(args))
		for _, t := range tail {
			query += t
		}
		rows, err := st.query(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// insertOrders inserts orders with multi-row INSERTs: those still ordered
// without a cancel reason (up to placedChunk rows each), the others with
// theirs (up to insertChunk).
func (st *OrderStore) insertOrders(ctx context.Context, tx *sql.Tx, orders []*seckill.Order) error {
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
func (st *OrderStore) insertPlaced(ctx context.Context, tx *sql.Tx, orders []*seckill.Order) error {
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
func (st *OrderStore) writerQueries() []string {
	qs := []string{st.q.takeStock}
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
func (st *OrderStore) prepareAll(ctx context.Context) {
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

// stmtOf is query's prepared statement within tx, or nil if it has none.
func (st *OrderStore) stmtOf(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if v, ok := st.stmts.Load(query); ok {
		return tx.StmtContext(ctx, v.(*sql.Stmt))
	}
	return nil
}

// exec runs query with args in tx, prepared if it can be.
func (st *OrderStore) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s := st.stmtOf(ctx, tx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// preparedPool runs queries on a pool prepared, each text prepared once
// on first use (query text → *sql.Stmt, which prepares it again on each
// connection it meets); a text the database refuses to prepare runs
// unprepared.
type preparedPool struct {
	db    *sql.DB
	stmts sync.Map
}

func (p *preparedPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	v, ok := p.stmts.Load(query)
	if !ok {
		s, err := p.db.PrepareContext(ctx, query)
		if err != nil {
			return p.db.QueryContext(ctx, query, args...)
		}
		if v, ok = p.stmts.LoadOrStore(query, s); ok {
			s.Close()
		}
	}
	return v.(*sql.Stmt).QueryContext(ctx, args...)
}

func (st *OrderStore) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if s := st.stmtOf(ctx, tx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

func (st *OrderStore) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s := st.stmtOf(ctx, tx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
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

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertFailedOrders inserts failed orders, whose reservation ids are
// valid keys (validFailedKey), with multi-row INSERTs of up to
// insertChunk rows. Their other text is made storable here.
func (st *OrderStore) insertFailedOrders(ctx context.Context, tx execer, failed []*seckill.FailedOrder) error {
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

// Order returns the order of a reservation; ErrNotFound when none.
func (st *OrderStore) Order(ctx context.Context, reservationID string) (*seckill.Order, error) {
	return byReservation(ctx, st, "order", validReservationID, scanOrder, st.q.order, reservationID)
}

// byReservation reads the row (named what in errors) that query selects
// by reservation id: ErrNotFound when there is none, or when valid says
// the id could not have one.
func byReservation[T any](ctx context.Context, st *OrderStore, what string, valid func(string) bool,
	scan func(interface{ Scan(...any) error }) (*T, error), query, reservationID string) (*T, error) {
	if !valid(reservationID) {
		return nil, fmt.Errorf("%s of reservation %q: %w", what, reservationID, seckill.ErrNotFound)
	}
	v, err := scan(st.db.read.QueryRowContext(ctx, query, reservationID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s of reservation %s: %w", what, reservationID, seckill.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("%s of reservation %s: %w", what, reservationID, st.db.classify(err))
	}
	return v, nil
}

// PayOrder moves an ordered order whose PayBy is after now to paid. An
// order already paid, cancelled or past its PayBy (PayBy <= now, at
// millisecond precision) is ESTATECONFLICT; an unknown reservation is
// ErrNotFound.
func (st *OrderStore) PayOrder(ctx context.Context, reservationID string, now time.Time) (*seckill.Order, error) {
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
func (st *OrderStore) CancelOrder(ctx context.Context, reservationID, reason string, now time.Time) (*seckill.Order, bool, error) {
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
func (st *OrderStore) orderInTx(ctx context.Context, tx *sql.Tx, reservationID string) (*seckill.Order, error) {
	o, err := scanOrder(tx.QueryRowContext(ctx, st.q.order, reservationID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.ErrNotFound
	}
	return o, err
}

// inTx runs fn in a write transaction, committing if fn returns nil.
func (st *OrderStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := st.db.write.BeginTx(ctx, nil)
	if err != nil {
		return st.db.classify(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return st.db.classify(err)
	}
	return st.db.classify(tx.Commit())
}

// ExpiredOrders lists up to limit orders still ordered with PayBy <= now
// (at millisecond precision), oldest deadline first. limit must be
// positive.
func (st *OrderStore) ExpiredOrders(ctx context.Context, now time.Time, limit int) ([]*seckill.Order, error) {
	if limit < 1 {
		return nil, fmt.Errorf("expired orders: %w", seckill.Errorf(seckill.EINVALID, "limit must be positive, got %d", limit))
	}
	orders, err := queryAll(ctx, st.db.read, scanOrder, st.q.expiredOrders, string(seckill.OrderPlaced), toMillis(now), limit)
	if err != nil {
		return nil, fmt.Errorf("expired orders: %w", st.db.classify(err))
	}
	return orders, nil
}

// FailedOrder returns the failed order of a reservation; ErrNotFound when
// none.
func (st *OrderStore) FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error) {
	return byReservation(ctx, st, "failed order", validFailedKey, scanFailedOrder, st.q.failedOrder, reservationID)
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
func (st *OrderStore) RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error {
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

// scanOrder reads the columns of orderColumns.
func scanOrder(row interface{ Scan(...any) error }) (*seckill.Order, error) {
	var s orderScan
	if err := row.Scan(s.targets()...); err != nil {
		return nil, err
	}
	return s.order(), nil
}

// orderScan holds one row of orderColumns as Scan reads it.
type orderScan struct {
	o                                  seckill.Order
	status                             string
	payBy, reservedAt, created, update int64
	reason                             sql.NullString
}

// targets are the Scan targets of orderColumns.
func (s *orderScan) targets() []any {
	return []any{&s.o.ID, &s.o.ReservationID, &s.o.SaleID, &s.o.UserID, &s.o.Qty, &s.o.AmountCents, &s.status,
		&s.payBy, &s.reservedAt, &s.created, &s.update, &s.reason}
}

// order is the scanned order.
func (s *orderScan) order() *seckill.Order {
	o := s.o
	o.Status = seckill.OrderStatus(s.status)
	o.PayBy, o.ReservedAt = fromMillis(s.payBy), fromMillis(s.reservedAt)
	o.CreatedAt, o.UpdatedAt = fromMillis(s.created), fromMillis(s.update)
	o.CancelReason = s.reason.String
	return &o
}

// scanFailedOrder reads the columns of failedOrderSelect.
func scanFailedOrder(row interface{ Scan(...any) error }) (*seckill.FailedOrder, error) {
	var (
		f                        seckill.FailedOrder
		attempts, created        int64
		payload                  []byte
		resolvedAt               sql.NullInt64
		resolution, note, solver sql.NullString
	)
	err := row.Scan(&f.ReservationID, &f.SaleID, &f.UserID, &f.Qty, &f.Reason, &attempts, &payload, &created,
		&resolvedAt, &resolution, &note, &solver)
	if err != nil {
		return nil, err
	}
	if resolvedAt.Valid {
		f.Resolution = &seckill.Resolution{
			Action: seckill.FailedOrderAction(resolution.String), Note: note.String,
			Actor: solver.String, ResolvedAt: fromMillis(resolvedAt.Int64),
		}
		if f.Resolution.Action == seckill.ResolveRedrive {
			f.Resolution.OrderID = seckill.OrderIDOf(f.ReservationID)
		}
	}
	f.Attempts = int(attempts)
	if len(payload) > 0 {
		f.Payload = payload
	}
	f.CreatedAt = fromMillis(created)
	return &f, nil
}

// validReservationID reports whether id can name an order. Other ids
// cannot exist, and must not reach a dialect that would reject them
// differently (MySQL's ASCII column).
func validReservationID(id string) bool {
	_, ok := seckill.SaleIDOfReservation(id)
	return ok
}

// validFailedKey reports whether id can key a failed order: 1 to 255 bytes
// of valid UTF-8 without NUL, which every dialect stores unchanged.
func validFailedKey(id string) bool {
	return id != "" && len(id) <= maxFailedTextBytes && utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// storableText returns s as every dialect can store it: valid UTF-8
// (invalid bytes become U+FFFD), no NUL (PostgreSQL refuses it in text),
// and at most maxBytes bytes, cut at a character boundary.
func storableText(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > maxBytes {
		i := maxBytes
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}
