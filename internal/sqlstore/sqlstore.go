// Package sqlstore owns the relational database, the source of truth for
// sales, orders and failed orders: one database/sql store that speaks three
// dialects, SQLite (the embedded default), MySQL/MariaDB and PostgreSQL. It
// owns the schema and its numbered migrations, the SQL text of each dialect,
// and the translation of driver errors into the domain's sentinels at this
// edge. Each port is a small store of its own over the DB: SaleStore,
// OrderWriter, Orders and FailedOrderStore (together the OrderStore),
// RestoreStore, LedgerStore, Payments, EventStore, DrawStore and
// EntryStore. Each lives in the file of its name: sales.go,
// order_writer.go (with holdings.go, what it knows of buyers' holdings),
// orders.go, failed_orders.go, order_store.go, restore.go (with
// restore_batch.go), ledger.go, payments.go, orderevents.go, draws.go,
// lottery_entries.go; the SQL of every dialect is in queries*.go, the
// schema in migrations/<dialect>/ and its runner in migrate.go.
//
// Times are stored as BIGINT unix milliseconds in *_ms columns: exact and
// identical in all three dialects, with no driver time parsing involved.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DB is an open database of one dialect.
type DB struct {
	dialect *dialect
	// write takes every write. On SQLite it holds one connection, so the
	// process's writes queue in Go instead of failing with "database is
	// locked"; elsewhere it is the same pool as read.
	write *sql.DB
	// read serves reads. On SQLite it is a separate pool of read-only
	// connections, which WAL lets run beside the writer.
	read *sql.DB

	// Now returns the current time; CreateSale stamps created_at with it.
	// Tests may replace it before first use.
	Now func() time.Time

	// orderEvents is set when order changes record their events in the
	// outbox (EnableOrderEvents); eventTexts memoises the inserts' texts
	// by row count (orderevents.go).
	orderEvents bool
	eventTexts  sync.Map
}

// Open connects to the database named by rawURL and checks that it answers.
// It does not migrate; call Migrate. URLs:
//
//	sqlite:PATH or sqlite://PATH       a file, created with its directory if
//	                                   missing; sqlite::memory: for a private
//	                                   in-memory database
//	mysql://user:pass@host:port/db?k=v MySQL or MariaDB; k=v are driver
//	                                   parameters or session variables
//	postgres://… or postgresql://…     PostgreSQL, any libpq-style URL
//
// A SQLite URL may end in ?k=v driver parameters (modernc.org/sqlite), which
// override the defaults this package sets.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	return OpenBounded(ctx, rawURL, DefaultBounds)
}

// OpenBounded is Open with bounds b on every session to a MySQL/MariaDB
// or PostgreSQL server (see Bounds).
func OpenBounded(ctx context.Context, rawURL string, b Bounds) (*DB, error) {
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, errors.New("open database: url has no scheme (want sqlite:, mysql:// or postgres://)")
	}
	var (
		db  *DB
		err error
	)
	switch strings.ToLower(scheme) {
	case "sqlite":
		db, err = openSQLite(rawURL)
	case "mysql":
		db, err = openServer(mysqlDialect, mysqlPool, rawURL, b)
	case "postgres", "postgresql":
		db, err = openServer(postgresDialect, postgresPool, rawURL, b)
	default:
		return nil, fmt.Errorf("open database: unsupported url scheme %q (want sqlite:, mysql:// or postgres://)", scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", scheme, err)
	}
	if err := db.Ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s database: %w", db.dialect.name, err)
	}
	return db, nil
}

// openServer opens a client-server database (MySQL/MariaDB, PostgreSQL)
// with pool, one sized pool for reads and writes. Connections are recycled
// so that a failed-over server or a load balancer's idle cut is not
// noticed as errors.
func openServer(d *dialect, pool func(rawURL string, b *Bounds) (*sql.DB, error), rawURL string, b Bounds) (*DB, error) {
	db, err := pool(rawURL, &b)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(DefaultMaxConns)
	db.SetMaxIdleConns(DefaultMaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute)
	return &DB{dialect: d, write: db, read: db}, nil
}

// DefaultMaxConns is the most connections Open keeps to a MySQL/MariaDB
// or PostgreSQL server (SetMaxConns changes it).
const DefaultMaxConns = 32

// SetMaxConns caps the connections db keeps to its server at n, idle ones
// included; n < 1 is ignored. Every process of a deployment opens up to
// its own n, so the processes' n together must fit the server's
// max_connections (PostgreSQL's default is 100, MariaDB's 151), with room
// for the server's other clients. SQLite's pools are sized by the engine
// (one writer, a few readers) and are left as they are.
func (db *DB) SetMaxConns(n int) {
	if db.dialect == sqliteDialect || n < 1 {
		return
	}
	db.write.SetMaxOpenConns(n)
	db.write.SetMaxIdleConns(n)
}

// MaxConns is the most connections db's writes may hold at once.
func (db *DB) MaxConns() int { return db.write.Stats().MaxOpenConnections }

// MaxSQLitePool caps the connections of an OpenPool on SQLite.
const MaxSQLitePool = 8

// OpenPool opens a plain database/sql pool of conns connections on the URL
// Open takes, with the same URL parsing and driver settings, checks that
// it answers, and names its dialect. Unlike a DB's, every connection of
// the pool may write, on SQLite too (at most MaxSQLitePool there; writers
// then wait for the file's lock up to the busy timeout instead of queueing
// in Go): it is for callers that race writers on purpose, such as the
// stock-deduction strategies that `seckill bench compare` sets side by
// side. It does not migrate, and the caller owns the schema it writes.
// Its sessions have no Bounds: a benchmark's strategies may wait for locks
// as long as the server lets them.
func OpenPool(ctx context.Context, rawURL string, conns int) (pool *sql.DB, dialect string, err error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, "", errors.New("open database: url has no scheme (want sqlite:, mysql:// or postgres://)")
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		dialect = sqliteDialect.name
		var (
			path   string
			params url.Values
		)
		if path, params, err = parseSQLiteURL(rawURL); err == nil {
			pool, err = sqliteFile(path, params)
		}
		conns = min(conns, MaxSQLitePool)
	case "mysql":
		dialect = mysqlDialect.name
		pool, err = mysqlPool(rawURL, nil)
	case "postgres", "postgresql":
		dialect = postgresDialect.name
		pool, err = postgresPool(rawURL, nil)
	default:
		return nil, "", fmt.Errorf("open database: unsupported url scheme %q (want sqlite:, mysql:// or postgres://)", scheme)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s database: %w", dialect, err)
	}
	pool.SetMaxOpenConns(conns)
	pool.SetMaxIdleConns(conns)
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("open %s database: %w", dialect, err)
	}
	return pool, dialect, nil
}

// Dialect names the database's SQL dialect: "sqlite", "mysql" or "postgres".
func (db *DB) Dialect() string { return db.dialect.name }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.write.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", db.classify(err))
	}
	if db.read != db.write {
		if err := db.read.PingContext(ctx); err != nil {
			return fmt.Errorf("ping: %w", db.classify(err))
		}
	}
	return nil
}

// Close closes the database. It is safe to call more than once.
func (db *DB) Close() error {
	err := db.write.Close()
	if db.read != db.write {
		err = errors.Join(err, db.read.Close())
	}
	if err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

func (db *DB) now() time.Time {
	if db.Now != nil {
		return db.Now()
	}
	return time.Now()
}

// querier is a pool or a transaction, for queryAll.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs query on q and scans every row it returns with scan. Its
// errors are the driver's, for the caller to classify and wrap.
func queryAll[T any](ctx context.Context, q querier, scan func(interface{ Scan(...any) error }) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// isUniqueViolation reports whether err is the dialect's unique-key
// violation.
func (db *DB) isUniqueViolation(err error) bool {
	return err != nil && db.dialect.isUniqueViolation(err)
}

// dialect is everything that differs between the databases: its SQL
// (queries_sqlite.go, queries_mysql.go, queries_postgres.go) and its
// driver's ways (sqlite.go, mysql.go, postgres.go).
type dialect struct {
	name string
	sql  *queries
	// isUniqueViolation recognises the driver's unique-key violation.
	isUniqueViolation func(error) bool
	// isTransient recognises an error after which the database has rolled
	// the transaction back and trying it again may succeed (a deadlock, a
	// serialization failure).
	isTransient func(error) bool
	// isUnavailable recognises the driver's own ways of saying that the
	// server is gone, shutting down or refusing connections, beyond the
	// network and context errors every dialect shares (unavailable.go).
	isUnavailable func(error) bool
	// lockMigrations serialises Migrate across processes, holding a lock
	// on conn's session until the returned unlock is called.
	lockMigrations func(ctx context.Context, conn *sql.Conn) (unlock func() error, err error)
	// unbound are the statements that lift a session's Bounds for a
	// migration.
	unbound []string
	// oneStatementPerExec is set when the driver runs only one statement
	// per Exec, so migrations must be split into statements.
	oneStatementPerExec bool
}
