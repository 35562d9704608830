package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// A sale's ledger a page at a time (reconcile.LedgerPages), for comparing a
// sale of millions of reservations with the stock store in the memory of
// one page: the totals in one read-only transaction (so that they agree
// with each other), the rows by keyset paging on (sale_id,
// reservation_id) in byte order, and the rows of a list of reservations.

// LedgerStore is the reconcile.LedgerPages (and conformance.LedgerStore) of a
// DB: what the database knows of a sale's units, whole or a page at a time,
// its counts for the archiver and the gauges, and its archive record.
type LedgerStore struct{ *orderDB }

// NewLedgerStore returns the ledger of db, which must be migrated.
func NewLedgerStore(db *DB) *LedgerStore { return &LedgerStore{newOrderDB(db)} }

// pageOf runs query, a page of a sale's rows by reservation id (ledgerQueries.
// ordersAfter), for up to limit rows after after.
func pageOf[T any](ctx context.Context, st *LedgerStore, what, query, saleID, after string, limit int, scan func(interface{ Scan(...any) error }) (*T, error)) ([]*T, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%s of sale %s: %w", what, saleID, seckill.Errorf(seckill.EINVALID, "limit must be positive"))
	}
	// Every id of the sale sorts between "<sale>." and "<sale>/".
	after = max(after, saleID+".")
	out, err := queryAll(ctx, st.db.read, scan, query, saleID, after, saleID+"/", limit)
	if err != nil {
		return nil, fmt.Errorf("%s of sale %s: %w", what, saleID, st.db.classify(err))
	}
	return out, nil
}

// OrdersAfter returns up to limit orders of the sale whose reservation id
// sorts after after, by reservation id, with their key digests: a heal
// gives the stock store back the keys of the orders it lost.
func (st *LedgerStore) OrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.Order, error) {
	return pageOf(ctx, st, "orders", st.sql.ledger.ordersAfter, saleID, after, limit, scanKeyedOrder)
}

// scanKeyedOrder reads the columns of orderColumns and key_digest.
func scanKeyedOrder(row interface{ Scan(...any) error }) (*seckill.Order, error) {
	var digest sql.NullString
	o, err := scanOrderThen(row, &digest)
	if err != nil {
		return nil, err
	}
	o.KeyDigest = digest.String
	return o, nil
}

// FailedOrdersAfter is OrdersAfter of failed orders.
func (st *LedgerStore) FailedOrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.FailedOrder, error) {
	return pageOf(ctx, st, "failed orders", st.sql.ledger.failedAfter, saleID, after, limit, scanFailedOrder)
}

// RestoresAfter is OrdersAfter of restore requests.
func (st *LedgerStore) RestoresAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.RestoreRequest, error) {
	return pageOf(ctx, st, "restore requests", st.sql.ledger.restoresAfter, saleID, after, limit, scanRestoreRequest)
}

// LedgerOf returns the rows of parts (orders, failed orders, restore
// requests) of the sale that belong to reservations of ids, in one
// read-only transaction.
func (st *LedgerStore) LedgerOf(ctx context.Context, saleID string, ids []string, parts seckill.LedgerParts) (*seckill.SaleLedger, error) {
	l := &seckill.SaleLedger{}
	if len(ids) == 0 || parts == 0 {
		return l, nil
	}
	tx, err := st.db.read.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("ledger of %d reservations: begin: %w", len(ids), st.db.classify(err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if parts&seckill.LedgerOrders != 0 {
		l.Orders, err = saleRowsIn(ctx, st, tx, st.rq.ordersIn, ids, saleID, scanOrder,
			func(o *seckill.Order) string { return o.SaleID })
	}
	if err == nil && parts&seckill.LedgerFailed != 0 {
		l.Failed, err = saleRowsIn(ctx, st, tx, st.sql.ledger.failedIn, ids, saleID, scanFailedOrder,
			func(f *seckill.FailedOrder) string { return f.SaleID })
	}
	if err == nil && parts&seckill.LedgerRestores != 0 {
		l.Restores, err = saleRowsIn(ctx, st, tx, st.sql.ledger.requestsIn, ids, saleID, scanRestoreRequest,
			func(q *seckill.RestoreRequest) string { return q.SaleID })
	}
	if err != nil {
		return nil, fmt.Errorf("ledger of %d reservations of sale %s: %w", len(ids), saleID, st.db.classify(err))
	}
	return l, nil
}

// saleRowsIn reads the rows that head (a SELECT … WHERE reservation_id IN)
// finds for ids, keeping those of sale saleID.
func saleRowsIn[T any](ctx context.Context, st *LedgerStore, tx *sql.Tx, head string, ids []string, saleID string,
	scan func(interface{ Scan(...any) error }) (*T, error), saleOf func(*T) string) ([]*T, error) {
	var out []*T
	err := st.eachRowIn(ctx, tx, head, ids, func(rows *sql.Rows) error {
		r, err := scan(rows)
		if err == nil && saleOf(r) == saleID {
			out = append(out, r)
		}
		return err
	})
	return out, err
}

// LedgerTotals reads the sale and what its ledger adds up to, in one
// read-only transaction: orders by status, failed orders (and those of
// claims the stock store lost), restore requests by state, the buyers
// over the limit and the sale's archive record. Each is an aggregate the
// database computes: the memory here is the same for any sale.
func (st *LedgerStore) LedgerTotals(ctx context.Context, saleID string) (*seckill.LedgerTotals, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("totals of sale %q: %w", saleID, seckill.ErrNotFound)
	}
	fail := func(what string, err error) (*seckill.LedgerTotals, error) {
		return nil, fmt.Errorf("totals of sale %s: %s: %w", saleID, what, st.db.classify(err))
	}
	tx, err := st.db.read.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fail("begin", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	t := &seckill.LedgerTotals{}
	t.Sale, err = scanSale(tx.QueryRowContext(ctx, st.sql.sales.byID, saleID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("totals of sale %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return fail("sale", err)
	}
	steps := []struct {
		what string
		read func(context.Context, *sql.Tx, string, *seckill.LedgerTotals) error
	}{
		{"orders", st.orderTotals},
		{"failed orders", st.failedTotals},
		{"restore requests", st.restoreTotals},
		{"buyers over the limit", st.overLimitBuyers},
		{"archive", st.archiveOf},
	}
	for _, step := range steps {
		if err := step.read(ctx, tx, saleID, t); err != nil {
			return fail(step.what, err)
		}
	}
	return t, nil
}

// orderTotals adds up the sale's orders by status.
func (st *LedgerStore) orderTotals(ctx context.Context, tx *sql.Tx, saleID string, t *seckill.LedgerTotals) error {
	rows, err := tx.QueryContext(ctx, st.sql.ledger.orderTotals, saleID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var status string
		var c seckill.LedgerCount
		if err = rows.Scan(&status, &c.Count, &c.Units); err != nil {
			break
		}
		dst := &t.Other
		switch seckill.OrderStatus(status) {
		case seckill.OrderPlaced:
			dst = &t.Ordered
		case seckill.OrderPaid:
			dst = &t.Paid
		case seckill.OrderCancelled, seckill.OrderRefundDue, seckill.OrderRefunded:
			// refund_due and refunded orders were cancelled first: their
			// units went back, as a cancelled order's.
			dst = &t.Cancelled
		}
		dst.Count, dst.Units = dst.Count+c.Count, dst.Units+c.Units
	}
	return errors.Join(err, rows.Err(), rows.Close())
}

// failedTotals adds up the sale's failed orders, and among them those of
// claims the stock store lost.
func (st *LedgerStore) failedTotals(ctx context.Context, tx *sql.Tx, saleID string, t *seckill.LedgerTotals) error {
	lost := seckill.ReasonLostInStockStore
	return tx.QueryRowContext(ctx, st.sql.ledger.failedTotals, lost, lost, saleID).Scan(&t.Failed.Count, &t.Failed.Units, &t.LostClaims.Count, &t.LostClaims.Units)
}

// restoreTotals counts the sale's restore requests by state, and those
// not done that were alerted.
func (st *LedgerStore) restoreTotals(ctx context.Context, tx *sql.Tx, saleID string, t *seckill.LedgerTotals) error {
	rows, err := tx.QueryContext(ctx, st.sql.ledger.restoreTotals, saleID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var state string
		var n, alerted int64
		if err = rows.Scan(&state, &n, &alerted); err != nil {
			break
		}
		switch seckill.RestoreState(state) {
		case seckill.RestoreStateParked:
			t.Parked += n
		case seckill.RestoreStateRedisPending:
			t.RedisPending += n
		case seckill.RestoreStateDone:
			t.Done += n
			alerted = 0
		default:
			t.OtherState += n
		}
		t.Alerted += alerted
	}
	return errors.Join(err, rows.Err(), rows.Close())
}

// overLimitBuyers counts the buyers whose live orders exceed the sale's
// purchase limit.
func (st *LedgerStore) overLimitBuyers(ctx context.Context, tx *sql.Tx, saleID string, t *seckill.LedgerTotals) error {
	return tx.QueryRowContext(ctx, st.sql.ledger.overLimit, saleID, string(seckill.OrderPlaced), string(seckill.OrderPaid), t.Sale.PurchaseLimit).Scan(&t.OverLimitBuyers)
}

// archiveOf reads the sale's archive record, if it has one.
func (st *LedgerStore) archiveOf(ctx context.Context, tx *sql.Tx, saleID string, t *seckill.LedgerTotals) error {
	var a seckill.SaleArchive
	var at int64
	err := tx.QueryRowContext(ctx, st.sql.ledger.archive, saleID).Scan(&at, &a.Claims)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	a.ArchivedAt = fromMillis(at)
	t.Archive = &a
	return nil
}

// RecordArchive records that the archiver is dropping a sale's stock-store
// keys, which hold claims reservation records. A later call (the drop did
// not happen, and a later pass tries again) replaces the record.
func (st *LedgerStore) RecordArchive(ctx context.Context, saleID string, claims int64, at time.Time) error {
	res, err := st.db.write.ExecContext(ctx, st.sql.ledger.updateArchive, toMillis(at), claims, saleID)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			_, err = st.db.write.ExecContext(ctx, st.sql.ledger.insertArchive, saleID, toMillis(at), claims)
		}
	}
	if err != nil && !st.db.isUniqueViolation(err) { // a concurrent pass recorded it
		return fmt.Errorf("record archive of sale %s: %w", saleID, st.db.classify(err))
	}
	return nil
}

// SaleLedger reads everything the database knows of a sale's units, in
// one read-only transaction so that the parts agree with each other: the
// sale, and all its orders, failed orders and restore requests, each
// oldest first (by creation time, then reservation id). ErrNotFound for an
// unknown sale.
func (st *LedgerStore) SaleLedger(ctx context.Context, saleID string) (*seckill.SaleLedger, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("ledger of sale %q: %w", saleID, seckill.ErrNotFound)
	}
	tx, err := st.db.read.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("ledger of sale %s: begin: %w", saleID, st.db.classify(err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	l := &seckill.SaleLedger{}
	l.Sale, err = scanSale(tx.QueryRowContext(ctx, st.sql.sales.byID, saleID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger of sale %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("ledger of sale %s: %w", saleID, st.db.classify(err))
	}
	if l.Orders, err = queryAll(ctx, tx, scanOrder, st.sql.ledger.saleOrders, saleID); err != nil {
		return nil, fmt.Errorf("ledger of sale %s: orders: %w", saleID, st.db.classify(err))
	}
	if l.Failed, err = queryAll(ctx, tx, scanFailedOrder, st.sql.ledger.saleFailedOrders, saleID); err != nil {
		return nil, fmt.Errorf("ledger of sale %s: failed orders: %w", saleID, st.db.classify(err))
	}
	if l.Restores, err = queryAll(ctx, tx, scanRestoreRequest, st.sql.ledger.saleRequests, saleID); err != nil {
		return nil, fmt.Errorf("ledger of sale %s: restore requests: %w", saleID, st.db.classify(err))
	}
	return l, nil
}

// SaleWork counts, in one statement, what the database still has to do
// for a sale, as the archiver (internal/archive) asks before it frees the
// sale's Redis keys: recorded is the number of reservations with an order
// or a failed order, awaitingPayment the orders still ordered (the
// payment timeout will cancel and restore them), openRestores the restore
// requests not done (parked or redis_pending).
func (st *LedgerStore) SaleWork(ctx context.Context, saleID string) (recorded, awaitingPayment, openRestores int64, err error) {
	var orders, failed int64
	err = st.db.read.QueryRowContext(ctx, st.sql.ledger.saleWork, saleID, saleID, saleID, string(seckill.OrderPlaced), saleID,
		string(seckill.RestoreStateDone)).Scan(&orders, &failed, &awaitingPayment, &openRestores)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("work of sale %s: %w", saleID, err)
	}
	return orders + failed, awaitingPayment, openRestores, nil
}

// SaleCounters are the database's counts of a sale for the
// reconciliation gauges, read without walking its orders: the sale's row
// (its stock is updated in the same transactions that create, cancel and
// restore orders), and its failed orders and unfinished restore requests,
// which are few.
type SaleCounters struct {
	Stock        int64 // units put on sale
	Unsold       int64 // units not in an order ordered or paid
	FailedOrders int64
	FailedUnits  int64
	Parked       int64 // restore requests waiting for their order
	RedisPending int64 // restore requests waiting for their Redis step
	Alerted      int64 // unfinished restore requests that raised an alert
}

// SaleCounters reads a sale's SaleCounters in one statement; ErrNotFound
// for an unknown sale. The restore counts use the (state, created) index:
// they cost what is unfinished, not the sale's history.
func (st *LedgerStore) SaleCounters(ctx context.Context, saleID string) (SaleCounters, error) {
	parked, pending := string(seckill.RestoreStateParked), string(seckill.RestoreStateRedisPending)
	var c SaleCounters
	err := st.db.read.QueryRowContext(ctx, st.sql.ledger.saleCounters, saleID, saleID,
		parked, parked, pending, saleID,
		pending, parked, pending, saleID,
		parked, pending, saleID, saleID).Scan(&c.Stock, &c.Unsold, &c.FailedOrders, &c.FailedUnits, &c.Parked, &c.RedisPending, &c.Alerted)
	if errors.Is(err, sql.ErrNoRows) {
		return SaleCounters{}, fmt.Errorf("counters of sale %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return SaleCounters{}, fmt.Errorf("counters of sale %s: %w", saleID, err)
	}
	return c, nil
}
