package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// OrderStore is the seckill.OrderStore of a DB: the order writer, the
// orders and the failed orders, each a store of its own over the same
// prepared statements, with the DB's restore store and ledger beside them.
type OrderStore struct {
	*orderDB
	*OrderWriter
	*Orders
	*FailedOrderStore
	// Restores and Ledger share the statements of the stores above.
	Restores *RestoreStore
	Ledger   *LedgerStore
}

var _ seckill.OrderStore = (*OrderStore)(nil)

// NewOrderStore returns the order store of db, which must be migrated.
func NewOrderStore(db *DB) *OrderStore {
	c := newOrderDB(db)
	return &OrderStore{
		orderDB:          c,
		OrderWriter:      &OrderWriter{orderDB: c, lockAfter: persistLockAfter},
		Orders:           &Orders{c},
		FailedOrderStore: &FailedOrderStore{c},
		Restores:         &RestoreStore{orderDB: c},
		Ledger:           &LedgerStore{c},
	}
}

// orderDB is what the order-side stores of a DB share: the dialect's SQL,
// the statements prepared once, and the retries of their transactions.
type orderDB struct {
	db  *DB
	sql *queries
	// q and rq are sql's orders and restores.
	q  *orderQueries
	rq *restoreQueries
	// stmts holds the writer's statements, prepared once (query text →
	// *sql.Stmt on the write pool) and used in each transaction through
	// Tx.StmtContext, which reuses a connection's prepared copy. The texts
	// are few (variable-length lists come in power-of-two sizes), so all
	// of them are prepared before the first transaction: preparing on the
	// pool while a transaction holds its only connection (SQLite) would
	// wait forever (OrderWriter.prepareAll).
	stmts sync.Map
	// texts memoises the statement texts built per batch (a head and
	// lists of bind parameters, textKey → string): the same few come
	// back every batch, and building them was a quarter of the writer's
	// CPU in the persistence benchmark's profile.
	texts sync.Map
	// reads is the read pool with its statements prepared once: the
	// restore retry pass lists restore requests after every batch the
	// writer persists, and parsing its two queries each time was 3.6 % of
	// the server's CPU in `seckill bench live`.
	reads preparedPool

	// maxAttempts bounds the transactions one call tries while it loses
	// to concurrent writers; maxBackoff caps the jittered pause between
	// them.
	maxAttempts int
	maxBackoff  time.Duration
}

func newOrderDB(db *DB) *orderDB {
	return &orderDB{
		db:          db,
		sql:         db.dialect.sql,
		q:           &db.dialect.sql.orders,
		rq:          &db.dialect.sql.restores,
		reads:       preparedPool{db: db.read},
		maxAttempts: persistAttempts,
		maxBackoff:  persistMaxBackoff,
	}
}

// errConflict marks a transaction that lost to a concurrent writer: the
// sale's version moved, a competing writer inserted the same reservation,
// or the database aborted the transaction (deadlock, serialization
// failure). The whole transaction is tried again.
var errConflict = errors.New("lost to a concurrent writer")

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
func (st *orderDB) tuplesText(head string, rows, width int) string {
	k := textKey{head: head, rows: rows, width: width}
	if t, ok := st.texts.Load(k); ok {
		return t.(string)
	}
	t := head + st.q.tuples(rows, width)
	st.texts.Store(k, t)
	return t
}

// pause waits before attempt (2, 3, …): a random time in [d/2, d], d
// doubling from 2ms up to maxBackoff, so that writers that collided spread
// out instead of colliding again.
func (st *orderDB) pause(ctx context.Context, attempt int) error {
	d := min(st.maxBackoff, time.Millisecond<<min(attempt-1, 20))
	return startstop.Sleep(ctx, d/2+rand.N(d/2+1))
}

// inTx runs fn in a write transaction, committing if fn returns nil.
func (st *orderDB) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
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

// conflictOr wraps err with what, marking it errConflict when it is a
// unique violation (a concurrent writer inserted the same reservation
// first) or a transient abort.
func (st *orderDB) conflictOr(err error, what string) error {
	if st.db.isUniqueViolation(err) || st.db.dialect.isTransient(err) {
		return fmt.Errorf("%s: %w: %w", what, errConflict, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// existing returns which of ids already have an order or a failed order.
func (st *orderDB) existing(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
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
func (st *orderDB) eachRowIn(ctx context.Context, tx *sql.Tx, head string, ids []string, scan func(*sql.Rows) error, tail ...string) error {
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

// stmtOf is query's prepared statement within tx, or nil if it has none.
func (st *orderDB) stmtOf(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if v, ok := st.stmts.Load(query); ok {
		return tx.StmtContext(ctx, v.(*sql.Stmt))
	}
	return nil
}

// exec runs query with args in tx, prepared if it can be.
func (st *orderDB) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s := st.stmtOf(ctx, tx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

func (st *orderDB) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if s := st.stmtOf(ctx, tx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
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

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// byReservation reads the row (named what in errors) that query selects
// by reservation id: ErrNotFound when there is none, or when valid says
// the id could not have one.
func byReservation[T any](ctx context.Context, st *orderDB, what string, valid func(string) bool,
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

// inRetriedTx runs fn in a write transaction, committing if fn returns
// nil, and starts over, as PersistReservations does, when the transaction
// loses to a concurrent writer (errConflict, a unique violation, a
// deadlock). fn must set its results afresh on every call.
func (st *orderDB) inRetriedTx(ctx context.Context, fn func(*sql.Tx) error) error {
	var err error
	for attempt := 1; attempt <= st.maxAttempts; attempt++ {
		if attempt > 1 {
			if serr := st.pause(ctx, attempt); serr != nil {
				return fmt.Errorf("%w (after: %w)", serr, err)
			}
		}
		err = st.inTx(ctx, fn)
		if err == nil {
			return nil
		} else if !errors.Is(err, errConflict) && !st.db.isUniqueViolation(err) && !st.db.dialect.isTransient(err) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", st.maxAttempts, err)
}
