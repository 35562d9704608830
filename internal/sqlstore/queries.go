package sqlstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill-dev/seckill"
)

// The SQL of the three dialects. A statement they share is written once,
// in this file, with '?' parameters, from which PostgreSQL's $1, $2, … are
// numbered (rebind). What a dialect has of its own, its sqlParts, is in
// queries_sqlite.go, queries_mysql.go and queries_postgres.go: the SQL that
// runs on MariaDB for X is X's statement here with queries_mysql.go's parts
// in it. Statements ending in "IN " or "VALUES " are completed in Go with
// lists of bind parameters (list, tuples).

// queries is the SQL text of one dialect, by the code that runs it.
type queries struct {
	// bind is the i-th (1-based) bind parameter: '?' or '$i'.
	bind func(i int) string
	// byteOrder makes a comparison or an ORDER BY of ids byte order:
	// MySQL's ids are ascii_bin, SQLite compares TEXT as bytes,
	// PostgreSQL's TEXT follows the database's collation.
	byteOrder string

	migrations migrationQueries
	sales      saleQueries
	orders     orderQueries
	restores   restoreQueries
	ledger     ledgerQueries
	payments   paymentQueries
	admin      adminQueries
	events     eventQueries
	draws      drawQueries
	entries    entryQueries
	places     placeQueries
}

// sqlParts is what one dialect's SQL has of its own.
type sqlParts struct {
	// numbered is set when bind parameters are $1, $2, … (PostgreSQL).
	numbered bool
	// createMigrationsTable creates schema_migrations (version, name,
	// applied_at_ms) if it does not exist.
	createMigrationsTable string
	// lockMigrations and unlockMigrations take and release the lock that
	// serialises migrations across processes, currentSchema names the
	// schema they create tables in (see dialect.lockMigrations).
	lockMigrations, unlockMigrations, currentSchema string
	// forUpdate locks the rows a read selects until the transaction ends:
	// " FOR UPDATE", or "" on SQLite, whose IMMEDIATE transactions hold the
	// database's write lock from BEGIN.
	forUpdate string
	// skipLocked is forUpdate that skips the rows locked already.
	skipLocked string
	// ignoreDuplicateID ends an INSERT so that a row whose id exists is
	// skipped.
	ignoreDuplicateID string
	// byteOrder: see queries.
	byteOrder string
	// primaryKey follows the table of a keyset page by reservation id
	// (MySQL: FORCE INDEX (PRIMARY)); noIndex precedes the page's other
	// columns (SQLite: +, which keeps the planner off their indexes). See
	// ledgerQueries.ordersAfter.
	primaryKey, noIndex string
	// heldSum is SUM(qty) as a BIGINT (PostgreSQL's SUM of a BIGINT is a
	// NUMERIC).
	heldSum string
	// heldByBuyer and insertPlacedArrays: see orderQueries.
	heldByBuyer, insertPlacedArrays string
	// upsertEntry ends an INSERT of lottery entries so that a row whose id
	// exists takes the new reservation_id, unless that is '': a won
	// reservation is never unwon (a copy from a stock store that lost the
	// draw's results leaves the database's).
	upsertEntry string
	// keepLaterPace ends the INSERT of a queue sale's pace so that a row
	// already there takes it only if it is not older.
	keepLaterPace string
	// keepFirst ends an INSERT so that a row any unique key of the table
	// already holds is left as it is, and not counted as affected (on
	// MySQL by a no-op update of sale_id, a column of each table it ends
	// inserts into).
	keepFirst string
}

// newQueries is the SQL of the dialect whose own parts are p.
func newQueries(p sqlParts) *queries {
	s := func(q string) string { return q }
	bind := func(int) string { return "?" }
	if p.numbered {
		s, bind = rebind, func(i int) string { return "$" + strconv.Itoa(i) }
	}
	return &queries{
		bind:      bind,
		byteOrder: p.byteOrder,
		migrations: migrationQueries{
			createTable: p.createMigrationsTable,
			applied:     s(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`),
			record:      s(`INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES (?, ?, ?)`),
			lock:        p.lockMigrations, unlock: p.unlockMigrations, currentSchema: p.currentSchema,
		},
		sales:    newSaleQueries(s),
		orders:   newOrderQueries(p, s, bind),
		restores: newRestoreQueries(p, s),
		ledger:   newLedgerQueries(p, s),
		payments: newPaymentQueries(s),
		admin:    newAdminQueries(p, s),
		events:   newEventQueries(p, s, bind),
		draws:    newDrawQueries(s),
		entries:  newEntryQueries(p, s),
		places:   newPlaceQueries(p, s),
	}
}

// rebind numbers the '?' parameters of q as $1, $2, … (no statement has a
// '?' anywhere else).
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// migrationQueries is the SQL of Migrate (migrate.go).
type migrationQueries struct {
	// createTable creates schema_migrations; applied counts the rows of
	// version $1; record inserts (version, name, applied_at_ms).
	createTable, applied, record string
	// lock, unlock and currentSchema: see sqlParts.lockMigrations.
	lock, unlock, currentSchema string
}

// saleColumns is the column list every sale query selects, in scanSale's
// order.
const saleColumns = `id, name, price_cents, initial_stock, stock, per_user_limit, start_at_ms, end_at_ms, version, created_at_ms, buckets, currency, admission`

// saleQueries is the SQL of the sale store (sales.go).
type saleQueries struct {
	// insert inserts (id, name, price_cents, stock, initial_stock,
	// per_user_limit, start_at_ms, end_at_ms, version, created_at_ms,
	// updated_at_ms, buckets, currency, admission).
	insert string
	// byID selects saleColumns of sale $1.
	byID string
	// startingBefore selects saleColumns where start_at_ms <= $1 and
	// end_at_ms > $2.
	startingBefore string
}

func newSaleQueries(s func(string) string) saleQueries {
	return saleQueries{
		insert: s(`INSERT INTO sales (id, name, price_cents, stock, initial_stock, per_user_limit,
			start_at_ms, end_at_ms, version, created_at_ms, updated_at_ms, buckets, currency, admission)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		byID: s(`SELECT ` + saleColumns + ` FROM sales WHERE id = ?`),
		startingBefore: s(`SELECT ` + saleColumns + ` FROM sales
			WHERE start_at_ms <= ? AND end_at_ms > ?
			ORDER BY start_at_ms, id`),
	}
}

// orderColumns is the column list every order query selects, in
// scanOrder's order; orderInsertColumns is what an insert sets (a new
// order has no cancel reason).
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

// orderQueries is the SQL of the order writer, the orders and the failed
// orders.
type orderQueries struct {
	// bind returns the i-th (1-based) bind parameter: '?' or '$i'.
	bind func(i int) string
	// heldSum is the SQL of the units a buyer's orders hold, SUM(qty), as
	// a BIGINT (PostgreSQL's SUM of a BIGINT is a NUMERIC).
	heldSum string
	// heldByBuyer, when set, is the batch read's part that sums what
	// each buyer holds, taking the sale (%[1]s) and the buyers as one
	// array parameter (%[2]s), instead of an IN list (batchReadsOf).
	// PostgreSQL only.
	heldByBuyer string

	// orderIDsIn and failedOrderIDsIn select the reservation_id of the
	// orders (failed orders) whose reservation_id is IN a list.
	orderIDsIn       string
	failedOrderIDsIn string
	// saleState selects the stock, version, price, limit and currency of
	// sale $3, and whether the sale ($1, $2) has any failed order and any
	// restore request: the batch read of a writer that knows what the
	// batch's buyers hold, and whose batch can have neither (readBatch).
	saleState string
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
	// their reservation ids, buyers, quantities, amounts, reservation
	// times and key digests ($5-$10, "" for none): one statement of ten
	// parameters for a whole batch (insertPlaced). PostgreSQL only.
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

	// orderPage selects up to $4 orders of sale $1 whose reservation id
	// sorts after $2 and before $3, by reservation id (byte order);
	// orderPageByStatus those of status $4, up to $5. See ledgerQueries'
	// ordersAfter for the plan.
	orderPage         string
	orderPageByStatus string
	// buyerOrders selects up to MaxBuyerOrders orders of sale $1 by buyer
	// $2, oldest first (on the orders (sale_id, user_id) index).
	buyerOrders string
	// buyerFailed selects up to MaxBuyerOrders failed orders of sale $1
	// by buyer $2, oldest first.
	buyerFailed string
	// orderOfKey selects the oldest order of sale $1 by buyer $2 whose
	// key_digest is $3 (OrderOfKey).
	orderOfKey string
	// failedCounts selects, per sale with failed orders, the sale, their
	// count, the count of the resolved ones and the newest creation time,
	// the sale with the newest first. COUNT of resolved_at_ms counts the
	// resolved ones (it skips NULLs) and is a BIGINT in every dialect,
	// where SUM is a NUMERIC in PostgreSQL.
	failedCounts string
}

func newOrderQueries(p sqlParts, s func(string) string, bind func(int) string) orderQueries {
	return orderQueries{
		bind:               bind,
		heldSum:            p.heldSum,
		heldByBuyer:        p.heldByBuyer,
		insertPlacedArrays: p.insertPlacedArrays,

		orderIDsIn:       `SELECT reservation_id FROM orders WHERE reservation_id IN `,
		failedOrderIDsIn: `SELECT reservation_id FROM failed_orders WHERE reservation_id IN `,
		saleState: s(`SELECT stock, version, price_cents, per_user_limit, currency,
			EXISTS (SELECT 1 FROM failed_orders WHERE sale_id = ?), EXISTS (SELECT 1 FROM restore_requests WHERE sale_id = ?)
			FROM sales WHERE id = ?`),
		bumpSaleVersion: s(`UPDATE sales SET version = version + 1 WHERE id = ?`),
		takeStock: s(`UPDATE sales SET stock = stock - ?, version = version + 1, updated_at_ms = ?
			WHERE id = ? AND version = ? AND stock >= ?`),
		insertOrders:       `INSERT INTO orders (` + orderInsertColumns + `) VALUES `,
		insertFailedOrders: `INSERT INTO failed_orders (` + failedOrderColumns + `) VALUES `,

		insertCancelledOrders: `INSERT INTO orders (` + orderInsertColumns + `, cancel_reason) VALUES `,

		order:       s(`SELECT ` + orderColumns + ` FROM orders WHERE reservation_id = ?`),
		failedOrder: s(`SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id = ?`),
		payOrder: s(`UPDATE orders SET status = ?, updated_at_ms = ?
			WHERE reservation_id = ? AND status = ? AND pay_by_ms > ?`),
		cancelOrder: s(`UPDATE orders SET status = ?, cancel_reason = ?, updated_at_ms = ?
			WHERE reservation_id = ? AND status = ?`),
		expiredOrders: s(`SELECT ` + orderColumns + ` FROM orders
			WHERE status = ? AND pay_by_ms <= ?
			ORDER BY pay_by_ms LIMIT ?`),

		orderPage:         s(keyPage(p, orderColumns, "orders", "")),
		orderPageByStatus: s(keyPage(p, orderColumns, "orders", ` AND `+p.noIndex+`status = ?`)),
		buyerOrders: s(`SELECT ` + orderColumns + ` FROM orders WHERE sale_id = ? AND user_id = ?` +
			` ORDER BY created_at_ms, reservation_id LIMIT ` + strconv.Itoa(MaxBuyerOrders)),
		buyerFailed: s(`SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE sale_id = ? AND user_id = ?` +
			` ORDER BY created_at_ms, reservation_id LIMIT ` + strconv.Itoa(MaxBuyerOrders)),
		orderOfKey: s(`SELECT ` + orderColumns + ` FROM orders WHERE sale_id = ? AND user_id = ?` +
			` AND key_digest = ? ORDER BY created_at_ms, reservation_id LIMIT 1`),
		failedCounts: `SELECT sale_id, COUNT(*), COUNT(resolved_at_ms), MAX(created_at_ms)
		FROM failed_orders GROUP BY sale_id ORDER BY MAX(created_at_ms) DESC, sale_id`,
	}
}

// keyPage selects columns of table's rows of sale ? whose reservation id
// sorts after ? and before ?, and match more, up to ? of them, by
// reservation id (see ledgerQueries.ordersAfter).
func keyPage(p sqlParts, columns, table, more string) string {
	c := p.byteOrder
	return `SELECT ` + columns + ` FROM ` + table + p.primaryKey + ` WHERE ` + p.noIndex + `sale_id = ?` +
		` AND reservation_id` + c + ` > ? AND reservation_id` + c + ` < ?` + more +
		` ORDER BY reservation_id` + c + ` LIMIT ?`
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

// restoreColumns is the column list every restore request query selects,
// in scanRestoreRequest's order, and what an insert sets.
const restoreColumns = `reservation_id, sale_id, reason, state, attempts, last_error, alerted_at_ms, created_at_ms, updated_at_ms`

// restoreQueries is the restore store's SQL. Statements ending in "IN "
// are completed with a list of bind parameters numbered from the one after
// the statement's own.
type restoreQueries struct {
	// lockSale selects stock, initial_stock of sale $1, locking its row
	// until the transaction ends (on SQLite the IMMEDIATE transaction
	// holds the database's write lock already).
	lockSale string
	// orderForUpdate selects orderColumns of reservation $1, locking the
	// row, so that its status is the latest and stays so.
	orderForUpdate string
	// returnStock adds $1 units back to sale $3's stock, bumping its
	// version and setting updated_at_ms to $2, if stock <= initial_stock
	// - $4 (= $1).
	returnStock string

	// request selects restoreColumns of reservation $1.
	request string
	// insertRequest inserts one row of restoreColumns.
	insertRequest string
	// reopenRequest sets state $1, reason $2, updated_at_ms $3 on
	// reservation $4.
	reopenRequest string
	// updateRequest records an attempt on reservation $5: state $1,
	// attempts + 1, last_error $2, alerted_at_ms $3 unless set already
	// ($3 may be NULL), updated_at_ms $4; only if its state is one of $6,
	// $7, $8.
	updateRequest string
	// requestsByState selects up to $2 rows of state $1, oldest first.
	requestsByState string
	// requestsIn selects reservation_id, reason of the requests whose
	// reservation_id is IN a list.
	requestsIn string
	// settleParked sets state $1, updated_at_ms $2 on the requests in
	// state $3 whose reservation_id is IN a list (numbered from $4).
	settleParked string

	// The batch restore (RestoreOrders, FinishRestores). Statements
	// ending in "IN " take a list numbered after their own parameters;
	// ordersIn takes its list from $1 and then lockSuffix, which locks
	// the rows where the dialect has row locks.
	ordersIn   string
	lockSuffix string
	// cancelOrdersIn sets status $1, cancel_reason $2, updated_at_ms $3
	// on the orders of status $4 in the list (from $5).
	cancelOrdersIn string
	// reopenRequestsIn sets state $1, reason $2, updated_at_ms $3 on the
	// requests in the list (from $4).
	reopenRequestsIn string
	// insertRequestsHead is completed with rows of restoreColumns.
	insertRequestsHead string
	// finishRequestsIn sets state $1, attempts + 1, last_error $2,
	// updated_at_ms $3 on the requests in the list (from $4).
	finishRequestsIn string
}

func newRestoreQueries(p sqlParts, s func(string) string) restoreQueries {
	forUpdate := p.forUpdate
	return restoreQueries{
		lockSale:       s(`SELECT stock, initial_stock FROM sales WHERE id = ?` + forUpdate),
		orderForUpdate: s(`SELECT ` + orderColumns + ` FROM orders WHERE reservation_id = ?` + forUpdate),
		returnStock: s(`UPDATE sales SET stock = stock + ?, version = version + 1, updated_at_ms = ?
			WHERE id = ? AND stock <= initial_stock - ?`),

		request:       s(`SELECT ` + restoreColumns + ` FROM restore_requests WHERE reservation_id = ?`),
		insertRequest: s(`INSERT INTO restore_requests (` + restoreColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		reopenRequest: s(`UPDATE restore_requests SET state = ?, reason = ?, updated_at_ms = ? WHERE reservation_id = ?`),
		updateRequest: s(`UPDATE restore_requests SET state = ?, attempts = attempts + 1, last_error = ?, alerted_at_ms = COALESCE(alerted_at_ms, ?), updated_at_ms = ?
			WHERE reservation_id = ? AND state IN (?, ?, ?)`),
		requestsByState: s(`SELECT ` + restoreColumns + ` FROM restore_requests
			WHERE state = ? ORDER BY created_at_ms, reservation_id LIMIT ?`),
		requestsIn:         `SELECT reservation_id, reason FROM restore_requests WHERE reservation_id IN `,
		settleParked:       s(`UPDATE restore_requests SET state = ?, updated_at_ms = ? WHERE state = ? AND reservation_id IN `),
		ordersIn:           `SELECT ` + orderColumns + ` FROM orders WHERE reservation_id IN `,
		lockSuffix:         forUpdate,
		cancelOrdersIn:     s(`UPDATE orders SET status = ?, cancel_reason = ?, updated_at_ms = ? WHERE status = ? AND reservation_id IN `),
		reopenRequestsIn:   s(`UPDATE restore_requests SET state = ?, reason = ?, updated_at_ms = ? WHERE reservation_id IN `),
		insertRequestsHead: `INSERT INTO restore_requests (` + restoreColumns + `) VALUES `,
		finishRequestsIn:   s(`UPDATE restore_requests SET state = ?, attempts = attempts + 1, last_error = ?, updated_at_ms = ? WHERE reservation_id IN `),
	}
}

// ledgerQueries is the SQL of a sale's ledger (ledger.go).
type ledgerQueries struct {
	// saleOrders, saleFailedOrders and saleRequests select every order
	// (orderColumns), failed order (failedOrderSelect) and request
	// (restoreColumns) of sale $1, oldest first.
	saleOrders       string
	saleFailedOrders string
	saleRequests     string

	// ordersAfter, failedAfter and restoresAfter select up to $4 orders
	// (failed orders, restore requests) of sale $1 whose reservation id
	// sorts after $2 and before $3, by reservation id in byte order. A
	// sale's ids all start "<sale>.", so [$2, $3) is a range of the unique
	// index on reservation_id (MySQL and SQLite are told so: they would
	// otherwise take the sale_id index and sort all of the sale's rows for
	// each page); PostgreSQL has indexes of its own in byte order (0008).
	ordersAfter, failedAfter, restoresAfter string
	// failedIn and requestsIn select failedOrderSelect (restoreColumns) of
	// the rows whose reservation_id is IN a list; restoreQueries.ordersIn
	// is the same of orders.
	failedIn, requestsIn string

	// orderTotals selects status, COUNT(*), SUM(qty) of the orders of sale
	// $1 by status.
	orderTotals string
	// failedTotals selects the count and units of the failed orders of
	// sale $3, and of those whose reason starts with $1 (= $2), which is
	// seckill.ReasonLostInStockStore.
	failedTotals string
	// restoreTotals selects state, COUNT(*), COUNT(alerted_at_ms) of the
	// restore requests of sale $1 by state.
	restoreTotals string
	// overLimit counts the buyers of sale $1 whose orders of status $2 or
	// $3 hold more than $4 units.
	overLimit string
	// archive selects archived_at_ms, claims of sale $1's archive record;
	// updateArchive sets them ($1, $2) for sale $3, insertArchive inserts
	// (sale_id, archived_at_ms, claims).
	archive, updateArchive, insertArchive string

	// saleWork counts the orders of sale $1, its failed orders ($2), its
	// orders ($3) of status $4, and its restore requests ($5) not in state
	// $6.
	saleWork string
	// saleCounters selects initial_stock and stock of sale $14, the count
	// and units of its failed orders ($1, $2), and, of its restore
	// requests in state $4 or $5 (sale $6; likewise $8-$10 and $11-$13),
	// those in state $3, those in state $7 and those alerted. The restore
	// counts use the (state, created) index: they cost what is
	// unfinished, not the sale's history.
	saleCounters string
}

func newLedgerQueries(p sqlParts, s func(string) string) ledgerQueries {
	lost := strconv.Itoa(len(seckill.ReasonLostInStockStore))
	isLost := `SUBSTR(reason, 1, ` + lost + `) = ?`
	open := `FROM restore_requests WHERE state IN (?, ?) AND sale_id = ?` // the sale's unfinished requests
	return ledgerQueries{
		saleOrders: s(`SELECT ` + orderColumns + ` FROM orders
			WHERE sale_id = ? ORDER BY created_at_ms, reservation_id`),
		saleFailedOrders: s(`SELECT ` + failedOrderSelect + ` FROM failed_orders
			WHERE sale_id = ? ORDER BY created_at_ms, reservation_id`),
		saleRequests: s(`SELECT ` + restoreColumns + ` FROM restore_requests
			WHERE sale_id = ? ORDER BY created_at_ms, reservation_id`),

		ordersAfter:   s(keyPage(p, orderColumns+", key_digest", "orders", "")),
		failedAfter:   s(keyPage(p, failedOrderSelect, "failed_orders", "")),
		restoresAfter: s(keyPage(p, restoreColumns, "restore_requests", "")),
		failedIn:      `SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id IN `,
		requestsIn:    `SELECT ` + restoreColumns + ` FROM restore_requests WHERE reservation_id IN `,

		orderTotals: s(`SELECT status, COUNT(*), COALESCE(SUM(qty), 0) FROM orders WHERE sale_id = ? GROUP BY status`),
		failedTotals: s(`SELECT COUNT(*), COALESCE(SUM(qty), 0),
		COUNT(CASE WHEN ` + isLost + ` THEN 1 END), COALESCE(SUM(CASE WHEN ` + isLost + ` THEN qty END), 0)
		FROM failed_orders WHERE sale_id = ?`),
		restoreTotals: s(`SELECT state, COUNT(*), COUNT(alerted_at_ms) FROM restore_requests WHERE sale_id = ? GROUP BY state`),
		overLimit: s(`SELECT COUNT(*) FROM (SELECT user_id FROM orders
		WHERE sale_id = ? AND status IN (?, ?) GROUP BY user_id HAVING SUM(qty) > ?) over_limit`),
		archive:       s(`SELECT archived_at_ms, claims FROM sale_archives WHERE sale_id = ?`),
		updateArchive: s(`UPDATE sale_archives SET archived_at_ms = ?, claims = ? WHERE sale_id = ?`),
		insertArchive: s(`INSERT INTO sale_archives (sale_id, archived_at_ms, claims) VALUES (?, ?, ?)`),

		saleWork: s(`SELECT (SELECT COUNT(*) FROM orders WHERE sale_id = ?),
		(SELECT COUNT(*) FROM failed_orders WHERE sale_id = ?),
		(SELECT COUNT(*) FROM orders WHERE sale_id = ? AND status = ?),
		(SELECT COUNT(*) FROM restore_requests WHERE sale_id = ? AND state <> ?)`),
		saleCounters: s(`SELECT s.initial_stock, s.stock,
		(SELECT COUNT(*) FROM failed_orders WHERE sale_id = ?),
		(SELECT COALESCE(SUM(qty), 0) FROM failed_orders WHERE sale_id = ?),
		(SELECT COUNT(CASE WHEN state = ? THEN 1 END) ` + open + `),
		(SELECT COUNT(CASE WHEN state = ? THEN 1 END) ` + open + `),
		(SELECT COUNT(alerted_at_ms) ` + open + `)
		FROM sales s WHERE s.id = ?`),
	}
}

// paymentColumns is what payment queries select, in scanPayment's order,
// and what an insert sets.
const paymentColumns = `event_id, type, reservation_id, sale_id, amount_cents, currency, source, outcome, from_status, to_status, detail, received_at_ms`

// paymentQueries is the SQL of the payment store (payments.go).
type paymentQueries struct {
	// byEventID selects paymentColumns of event $1.
	byEventID string
	// orderAndCurrency selects orderColumns of reservation $1 and its
	// sale's currency.
	orderAndCurrency string
	// insert inserts a row of paymentColumns.
	insert string
	// moveOrder sets status $1, updated_at_ms $2 on reservation $3 if its
	// status is $4.
	moveOrder string
}

func newPaymentQueries(s func(string) string) paymentQueries {
	return paymentQueries{
		byEventID: s(`SELECT ` + paymentColumns + ` FROM payment_events WHERE event_id = ?`),
		orderAndCurrency: s(`SELECT ` + orderColumns + `,
		(SELECT currency FROM sales WHERE sales.id = orders.sale_id)
		FROM orders WHERE reservation_id = ?`),
		insert:    s(`INSERT INTO payment_events (` + paymentColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		moveOrder: s(`UPDATE orders SET status = ?, updated_at_ms = ? WHERE reservation_id = ? AND status = ?`),
	}
}

// auditColumns is what audit-log queries select, in scanAudit's order.
const auditColumns = `id, sale_id, subject, actor, action, detail, at_ms`

// adminQueries is the SQL of the operator's side of a sale (admin.go) and
// of resolving failed orders (failed_orders.go).
type adminQueries struct {
	// lockSale selects saleColumns of sale $1, locking the row.
	lockSale string
	// listSales selects saleColumns; completed in Go with a WHERE clause
	// and "ORDER BY start_at_ms DESC, id DESC LIMIT n" (see ListSales).
	listSales string
	// editSale sets every editable column of sale $10 at version $11.
	editSale string
	// endSale sets start_at_ms $1, end_at_ms $2, updated_at_ms $3 of sale
	// $4 at version $5.
	endSale string
	// addStock adds $1 to stock and initial_stock of sale $3 at version $4.
	addStock string
	// insertAudit inserts (sale_id, subject, actor, action, detail, at_ms).
	insertAudit string
	// auditOfSale selects auditColumns of sale $1, newest first, up to $2;
	// auditAll the same of every sale, up to $1.
	auditOfSale string
	auditAll    string

	// failedForUpdate selects failedOrderSelect of reservation $1, locked.
	failedForUpdate string
	// saleForRedrive selects stock, version, price_cents, per_user_limit
	// of sale $1, locked.
	saleForRedrive string
	// buyerHeld sums the qty of the orders of sale $1 by user $2 in status
	// $3 or $4.
	buyerHeld string
	// resolveFailed sets resolved_at_ms $1, resolution $2,
	// resolution_note $3, resolved_by $4 of reservation $5 if unresolved.
	resolveFailed string
}

func newAdminQueries(p sqlParts, s func(string) string) adminQueries {
	lock := p.forUpdate
	return adminQueries{
		lockSale:  s(`SELECT ` + saleColumns + ` FROM sales WHERE id = ?` + lock),
		listSales: `SELECT ` + saleColumns + ` FROM sales`,
		editSale: s(`UPDATE sales SET name = ?, price_cents = ?, currency = ?, stock = ?, initial_stock = ?,
			per_user_limit = ?, start_at_ms = ?, end_at_ms = ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`),
		endSale: s(`UPDATE sales SET start_at_ms = ?, end_at_ms = ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`),
		addStock: s(`UPDATE sales SET stock = stock + ?, initial_stock = initial_stock + ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`),
		insertAudit: s(`INSERT INTO audit_log (sale_id, subject, actor, action, detail, at_ms) VALUES (?, ?, ?, ?, ?, ?)`),
		auditOfSale: s(`SELECT ` + auditColumns + ` FROM audit_log WHERE sale_id = ? ORDER BY id DESC LIMIT ?`),
		auditAll:    s(`SELECT ` + auditColumns + ` FROM audit_log ORDER BY id DESC LIMIT ?`),

		failedForUpdate: s(`SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id = ?` + lock),
		saleForRedrive:  s(`SELECT stock, version, price_cents, per_user_limit FROM sales WHERE id = ?` + lock),
		buyerHeld: s(`SELECT COALESCE(SUM(qty), 0) FROM orders
			WHERE sale_id = ? AND user_id = ? AND status IN (?, ?)`),
		resolveFailed: s(`UPDATE failed_orders SET resolved_at_ms = ?, resolution = ?, resolution_note = ?, resolved_by = ?
			WHERE reservation_id = ? AND resolved_at_ms IS NULL`),
	}
}

// eventInsertColumns is what insertOrderEvents sets; state defaults to
// pending.
const (
	eventInsertColumns = `id, type, order_id, reservation_id, sale_id, user_id, qty, amount_cents, currency, at_ms, next_at_ms, retry_from_ms`
	eventInsertWidth   = 12
	eventColumns       = `seq, id, type, order_id, reservation_id, sale_id, user_id, qty, amount_cents, currency, at_ms,
		state, attempts, next_at_ms, retry_from_ms, last_error, delivered_at_ms, dead_at_ms`
	// maxEventErrorBytes bounds a delivery's stored error.
	maxEventErrorBytes = 500
)

// eventQueries is the order-event outbox's SQL (orderevents.go).
type eventQueries struct {
	bind func(i int) string
	// insertHead is completed with rows of eventInsertColumns, then
	// insertTail, which skips an event whose id exists.
	insertHead, insertTail string
	// saleTerms selects currency, price_cents of sale $1.
	saleTerms string
	// candidates selects up to $3 seqs of pending events due at $1 whose
	// lease ended by $2 and that are the first undelivered event of their
	// order, soonest first.
	candidates string
	// lockHead selects eventColumns of the events of state pending whose
	// lease ended by $1 and whose seq is IN a list (from $2), completed
	// with lockLimit (the list's last parameter + 1: the most rows, in the
	// candidates' order, longest due first; by seq alone a claim among
	// more due events than it may take took the lowest seqs, the same ones
	// again as soon as they were due again) and lockTail, which locks
	// them and skips rows locked already.
	lockHead, lockTail string
	lockLimit          func(i int) string
	// leaseIn sets lease_owner $1, lease_until_ms $2 and counts an
	// attempt on the events whose seq is IN a list (from $3).
	leaseIn string
	// deliveredIn sets delivered at $1 on the pending events whose seq is
	// IN a list (from $2).
	deliveredIn string
	// failed sets state $1, next_at_ms $2, dead_at_ms $3, last_error $4
	// on event seq $5 if owner $6 leases it and it is pending.
	failed string
	// redeliver sets pending, next_at_ms and retry_from_ms $1 on event id
	// $2 if it is dead.
	redeliver string
	// byID selects eventColumns of event id $1.
	byID string
	// listState selects up to $2 events of state $1, newest first;
	// listAll up to $1 of any state.
	listState, listAll string
	// stateStats selects COUNT(*), MIN(at_ms) of the events of state $1.
	stateStats string
	// prunable selects the seqs of up to $2 events delivered before $1,
	// the oldest first (order_events_delivered_idx).
	prunable string
	// pruneIn deletes the delivered events whose seq is IN a list (from
	// $1).
	pruneIn string
}

func newEventQueries(p sqlParts, s func(string) string, bind func(int) string) eventQueries {
	return eventQueries{
		bind:       bind,
		insertHead: `INSERT INTO order_events (` + eventInsertColumns + `) VALUES `,
		insertTail: p.ignoreDuplicateID,
		saleTerms:  s(`SELECT currency, price_cents FROM sales WHERE id = ?`),
		candidates: s(`SELECT e.seq FROM order_events e
			WHERE e.state = 'pending' AND e.next_at_ms <= ? AND e.lease_until_ms <= ?
			AND NOT EXISTS (SELECT 1 FROM order_events p
				WHERE p.order_id = e.order_id AND p.seq < e.seq AND p.state <> 'delivered')
			ORDER BY e.next_at_ms, e.seq LIMIT ?`),
		lockHead:    s(`SELECT ` + eventColumns + ` FROM order_events WHERE state = 'pending' AND lease_until_ms <= ? AND seq IN `),
		lockTail:    p.skipLocked,
		lockLimit:   func(i int) string { return ` ORDER BY next_at_ms, seq LIMIT ` + bind(i) },
		leaseIn:     s(`UPDATE order_events SET lease_owner = ?, lease_until_ms = ?, attempts = attempts + 1 WHERE seq IN `),
		deliveredIn: s(`UPDATE order_events SET state = 'delivered', delivered_at_ms = ?, lease_until_ms = 0, last_error = '' WHERE state = 'pending' AND seq IN `),
		failed: s(`UPDATE order_events SET state = ?, next_at_ms = ?, dead_at_ms = ?, last_error = ?, lease_until_ms = 0
			WHERE seq = ? AND lease_owner = ? AND state = 'pending'`),
		redeliver: s(`UPDATE order_events SET state = 'pending', next_at_ms = ?, retry_from_ms = ?, dead_at_ms = NULL, lease_until_ms = 0
			WHERE id = ? AND state = 'dead'`),
		byID:       s(`SELECT ` + eventColumns + ` FROM order_events WHERE id = ?`),
		listState:  s(`SELECT ` + eventColumns + ` FROM order_events WHERE state = ? ORDER BY seq DESC LIMIT ?`),
		listAll:    s(`SELECT ` + eventColumns + ` FROM order_events ORDER BY seq DESC LIMIT ?`),
		stateStats: s(`SELECT COUNT(*), COALESCE(MIN(at_ms), 0) FROM order_events WHERE state = ?`),
		// state = 'delivered' is spelled out, not bound: SQLite and
		// PostgreSQL use a partial index only for a query that names its
		// predicate.
		prunable: s(`SELECT seq FROM order_events WHERE state = 'delivered' AND delivered_at_ms < ?
			ORDER BY delivered_at_ms LIMIT ?`),
		// By seq alone: with delivered_at_ms in it too, PostgreSQL
		// scanned every old event of order_events_delivered_idx for the
		// batch's seqs.
		pruneIn: s(`DELETE FROM order_events WHERE state = 'delivered' AND seq IN `),
	}
}

// list returns "(p, p, …)": n bind parameters numbered from first.
func (q *eventQueries) list(first, n int) string {
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

// drawQueries is the SQL of the lottery's draw records (draws.go).
type drawQueries struct {
	// insert inserts (sale_id, seed, created_at_ms).
	insert string
	// bySale selects sale_id, seed, drawn_at_ms, entrants, stock, winners
	// of sale $1.
	bySale string
	// lease sets lease_owner $1, lease_until_ms $2 of sale $3 if its lease
	// ended before $4 or is owner $5's.
	lease string
	// finish sets drawn_at_ms $1, entrants $2, stock $3, winners $4 of
	// sale $5 if it is not drawn.
	finish string
	// open selects the sales with a draw record that end after $1.
	open string
}

func newDrawQueries(s func(string) string) drawQueries {
	return drawQueries{
		insert: s(`INSERT INTO lottery_draws (sale_id, seed, created_at_ms) VALUES (?, ?, ?)`),
		bySale: s(`SELECT sale_id, seed, drawn_at_ms, entrants, stock, winners FROM lottery_draws WHERE sale_id = ?`),
		lease: s(`UPDATE lottery_draws SET lease_owner = ?, lease_until_ms = ?
		WHERE sale_id = ? AND (lease_until_ms < ? OR lease_owner = ?)`),
		finish: s(`UPDATE lottery_draws SET drawn_at_ms = ?, entrants = ?, stock = ?, winners = ?
		WHERE sale_id = ? AND drawn_at_ms = 0`),
		open: s(`SELECT d.sale_id FROM lottery_draws d JOIN sales s ON s.id = d.sale_id
		WHERE s.end_at_ms > ? ORDER BY d.sale_id`),
	}
}

// The lists an operator pages through: each page's statement depends on
// the filter, so it is built here, its arguments beside it.

// pageArgs collects the arguments of a list's statement, answering each
// with its bind parameter.
type pageArgs struct {
	bind func(int) string
	args []any
}

func (a *pageArgs) arg(v any) string {
	a.args = append(a.args, v)
	return a.bind(len(a.args))
}

// salesPage is a page of the sales in state ("" for all; at nowMs), after
// the sale (start, id) when after, newest start first, then by id
// descending: limit rows.
func (q *queries) salesPage(state seckill.SaleState, nowMs int64, after bool, start int64, id string, limit int) (string, []any) {
	a := &pageArgs{bind: q.bind}
	var where []string
	switch state {
	case seckill.SaleScheduled:
		where = append(where, "start_at_ms > "+a.arg(nowMs))
	case seckill.SaleLive:
		where = append(where, "start_at_ms <= "+a.arg(nowMs)+" AND end_at_ms > "+a.arg(nowMs))
	case seckill.SaleEnded:
		where = append(where, "end_at_ms <= "+a.arg(nowMs))
	}
	if after {
		where = append(where, "(start_at_ms < "+a.arg(start)+" OR (start_at_ms = "+a.arg(start)+" AND id < "+a.arg(id)+"))")
	}
	s := q.admin.listSales
	if len(where) > 0 {
		s += " WHERE " + strings.Join(where, " AND ")
	}
	return s + " ORDER BY start_at_ms DESC, id DESC LIMIT " + a.arg(limit), a.args
}

// failedPage is a page of the failed orders of sale ("" for every sale),
// open or resolved (state; "" or all for both), before the row (ms, id)
// when before, newest first (created_at_ms, then reservation id in byte
// order, both descending): limit rows. One sale's pages are a range of
// failed_orders_sale_created_idx (0010); all sales' pages walk
// failed_orders_created_idx.
func (q *queries) failedPage(sale string, state seckill.FailedOrderState, before bool, ms int64, id string, limit int) (string, []any) {
	a := &pageArgs{bind: q.bind}
	var where []string
	if sale != "" {
		where = append(where, "sale_id = "+a.arg(sale))
	}
	switch state {
	case seckill.FailedOpen:
		where = append(where, "resolved_at_ms IS NULL")
	case seckill.FailedResolved:
		where = append(where, "resolved_at_ms IS NOT NULL")
	}
	c := q.byteOrder
	if before {
		// The row value (created_at_ms, reservation_id) < (ms, id), spelt
		// so that every dialect sees a range on created_at_ms.
		where = append(where, "created_at_ms <= "+a.arg(ms)+
			" AND (created_at_ms < "+a.arg(ms)+" OR reservation_id"+c+" < "+a.arg(id)+")")
	}
	s := `SELECT ` + failedOrderSelect + ` FROM failed_orders`
	if len(where) > 0 {
		s += " WHERE " + strings.Join(where, " AND ")
	}
	return s + " ORDER BY created_at_ms DESC, reservation_id" + c + " DESC LIMIT " + a.arg(limit), a.args
}

// paymentsPage is a page of the payment records of outcomes, before the
// record (ms, id) when before, newest first (received_at_ms, then event
// id in byte order, both descending): limit rows.
func (q *queries) paymentsPage(outcomes []string, before bool, ms int64, id string, limit int) (string, []any) {
	a := &pageArgs{bind: q.bind}
	in := make([]string, len(outcomes))
	for i, o := range outcomes {
		in[i] = a.arg(o)
	}
	where := "outcome IN (" + strings.Join(in, ", ") + ")"
	c := q.byteOrder
	if before {
		where += " AND received_at_ms <= " + a.arg(ms) + " AND (received_at_ms < " + a.arg(ms) + " OR event_id" + c + " < " + a.arg(id) + ")"
	}
	return `SELECT ` + paymentColumns + ` FROM payment_events WHERE ` + where +
		` ORDER BY received_at_ms DESC, event_id` + c + ` DESC LIMIT ` + a.arg(limit), a.args
}

// entryQueries is the SQL of the lottery entries the archiver copies
// (lottery_entries.go).
type entryQueries struct {
	// insert is "INSERT … VALUES " completed with rows of (id, sale_id,
	// user_id, qty, reservation_id) tuples, then upsert (the archiver's
	// copy) or keep (an entry kept as it is made: a buyer's earlier entry
	// stays).
	insert, upsert, keep string
	// byUsers selects user_id, id, qty of sale $1's entries of the buyers
	// $2…: completed with their list ("($2, …)").
	byUsers string
	// counts selects the count of sale $1's entries and of those with a
	// reservation.
	counts string
	// byUser selects id, qty, reservation_id of sale $1's entry of user $2.
	byUser string
	// bySale selects id, user_id, qty of sale $1's entries, by id.
	bySale string
	// wonBySale selects user_id, reservation_id of sale $1's entries with
	// a reservation.
	wonBySale string
}

func newEntryQueries(p sqlParts, s func(string) string) entryQueries {
	return entryQueries{
		insert:    `INSERT INTO lottery_entries (id, sale_id, user_id, qty, reservation_id) VALUES `,
		upsert:    p.upsertEntry,
		keep:      p.keepFirst,
		byUsers:   s(`SELECT user_id, id, qty FROM lottery_entries WHERE sale_id = ? AND user_id IN `),
		counts:    s(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN reservation_id <> '' THEN 1 ELSE 0 END), 0) FROM lottery_entries WHERE sale_id = ?`),
		byUser:    s(`SELECT id, qty, reservation_id FROM lottery_entries WHERE sale_id = ? AND user_id = ?`),
		bySale:    s(`SELECT id, user_id, qty FROM lottery_entries WHERE sale_id = ? ORDER BY id` + p.byteOrder),
		wonBySale: s(`SELECT user_id, reservation_id FROM lottery_entries WHERE sale_id = ? AND reservation_id <> ''`),
	}
}

// placeQueries is the SQL of a waiting room's places (queue_places.go).
type placeQueries struct {
	// insert is "INSERT … VALUES " completed with rows of (sale_id,
	// user_id, score, ip) tuples, then keep (a buyer's earlier place
	// stays).
	insert, keep string
	// byUsers selects user_id, score, ip of sale $1's places of the
	// buyers $2…: completed with their list ("($2, …)").
	byUsers string
	// bySale selects user_id, score, ip of sale $1's places; count, how
	// many there are; forget deletes them; has selects 1 if buyer $2 has a
	// place.
	bySale, count, forget, has string
	// keepPace writes sale $1's pace (admitted $2, at_ms $3, rate $4)
	// unless the row holds a later one; pace selects admitted, at_ms, rate.
	keepPace, pace string
}

func newPlaceQueries(p sqlParts, s func(string) string) placeQueries {
	return placeQueries{
		insert:   `INSERT INTO queue_places (sale_id, user_id, score, ip) VALUES `,
		keep:     p.keepFirst,
		byUsers:  s(`SELECT user_id, score, ip FROM queue_places WHERE sale_id = ? AND user_id IN `),
		bySale:   s(`SELECT user_id, score, ip FROM queue_places WHERE sale_id = ?`),
		count:    s(`SELECT COUNT(*) FROM queue_places WHERE sale_id = ?`),
		forget:   s(`DELETE FROM queue_places WHERE sale_id = ?`),
		has:      s(`SELECT 1 FROM queue_places WHERE sale_id = ? AND user_id = ?`),
		keepPace: s(`INSERT INTO queue_paces (sale_id, admitted, at_ms, rate) VALUES (?, ?, ?, ?)`) + p.keepLaterPace,
		pace:     s(`SELECT admitted, at_ms, rate FROM queue_paces WHERE sale_id = ?`),
	}
}
