package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

var postgresDialect = &dialect{
	name: "postgres",
	q: queries{
		createMigrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version       BIGINT NOT NULL PRIMARY KEY,
			name          TEXT   NOT NULL,
			applied_at_ms BIGINT NOT NULL
		)`,
		migrationApplied: `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`,
		recordMigration:  `INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)`,

		insertSale: `INSERT INTO sales (id, name, price_cents, stock, initial_stock, per_user_limit,
			start_at_ms, end_at_ms, version, created_at_ms, updated_at_ms, buckets, currency, admission)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		sale: `SELECT ` + saleColumns + ` FROM sales WHERE id = $1`,
		salesStartingBefore: `SELECT ` + saleColumns + ` FROM sales
			WHERE start_at_ms <= $1 AND end_at_ms > $2
			ORDER BY start_at_ms, id`,
	},
	orders:   &postgresOrderQueries,
	restores: &postgresRestoreQueries,
	events:   newEventQueries(pgBind, ` FOR UPDATE SKIP LOCKED`, ` ON CONFLICT (id) DO NOTHING`),
	isUniqueViolation: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505" // unique_violation
	},
	isUnavailable: func(err error) bool {
		var (
			e  *pgconn.PgError
			ce *pgconn.ConnectError
		)
		if errors.As(err, &ce) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
			return true
		}
		// Class 08 connection exception; 57P01-57P03 admin or crash
		// shutdown, cannot connect now; 53300 too many connections; the
		// session's Bounds: 55P03 lock_timeout, 57014 statement_timeout
		// (query_canceled), 25P03 idle_in_transaction_session_timeout.
		return errors.As(err, &e) && (len(e.Code) == 5 && e.Code[:2] == "08" ||
			e.Code == "57P01" || e.Code == "57P02" || e.Code == "57P03" || e.Code == "53300" ||
			e.Code == "55P03" || e.Code == "57014" || e.Code == "25P03")
	},
	lockMigrations: lockPostgresMigrations,
	unbound:        unboundPostgres,
}

// postgresOrderQueries is the order store's SQL on PostgreSQL.
var postgresOrderQueries = orderQueries{
	bind: func(i int) string { return "$" + strconv.Itoa(i) },
	// A NUMERIC sum would turn the whole UNION's column into NUMERIC.
	heldSum: `CAST(SUM(qty) AS BIGINT)`,
	// One seek of orders_sale_user_idx per buyer, whatever the planner
	// believes of the table: with user_id IN (…) it chose, on a sale's
	// orders analyzed while few, to scan every order of the sale and
	// filter, once per batch, so a sale's writes slowed down as it sold
	// (30 ms a batch at 25,600 orders).
	heldByBuyer: `SELECT 4, b.user_id, h.held, 0, 0, 0, '' FROM unnest(CAST(%[2]s AS text[])) AS b(user_id)
		CROSS JOIN LATERAL (SELECT CAST(SUM(qty) AS BIGINT) AS held FROM orders
			WHERE sale_id = %[1]s AND user_id = b.user_id AND status <> 'cancelled') AS h
		WHERE h.held IS NOT NULL`,
	isTransient: func(err error) bool {
		var e *pgconn.PgError
		// serialization_failure (under a stricter default isolation than
		// READ COMMITTED), deadlock_detected, lock_not_available (the
		// session's lock_timeout: the row's holder may be a node cut off
		// inside its transaction, ended by idle_in_transaction_session_timeout).
		return errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01" || e.Code == "55P03")
	},

	orderIDsIn:       `SELECT reservation_id FROM orders WHERE reservation_id IN `,
	failedOrderIDsIn: `SELECT reservation_id FROM failed_orders WHERE reservation_id IN `,
	bumpSaleVersion:  `UPDATE sales SET version = version + 1 WHERE id = $1`,
	takeStock: `UPDATE sales SET stock = stock - $1, version = version + 1, updated_at_ms = $2
		WHERE id = $3 AND version = $4 AND stock >= $5`,
	insertOrders: `INSERT INTO orders (` + orderInsertColumns + `) VALUES `,
	insertPlacedArrays: `INSERT INTO orders (` + orderInsertColumns + `)
		SELECT 'o-' || r, r, $1, u, q, a, 'ordered', $2, ra, $3, $4, NULLIF(k, '')
		FROM unnest(CAST($5 AS text[]), CAST($6 AS text[]), CAST($7 AS bigint[]), CAST($8 AS bigint[]), CAST($9 AS bigint[]),
			CAST($10 AS text[]))
			AS t(r, u, q, a, ra, k)`,
	insertFailedOrders: `INSERT INTO failed_orders (` + failedOrderColumns + `) VALUES `,

	insertCancelledOrders: `INSERT INTO orders (` + orderInsertColumns + `, cancel_reason) VALUES `,

	order:       `SELECT ` + orderColumns + ` FROM orders WHERE reservation_id = $1`,
	failedOrder: `SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id = $1`,
	payOrder: `UPDATE orders SET status = $1, updated_at_ms = $2
		WHERE reservation_id = $3 AND status = $4 AND pay_by_ms > $5`,
	cancelOrder: `UPDATE orders SET status = $1, cancel_reason = $2, updated_at_ms = $3
		WHERE reservation_id = $4 AND status = $5`,
	expiredOrders: `SELECT ` + orderColumns + ` FROM orders
		WHERE status = $1 AND pay_by_ms <= $2
		ORDER BY pay_by_ms LIMIT $3`,
}

// postgresRestoreQueries is the restore store's SQL on PostgreSQL.
var postgresRestoreQueries = restoreQueries{
	lockSale:       `SELECT stock, initial_stock FROM sales WHERE id = $1 FOR UPDATE`,
	orderForUpdate: `SELECT ` + orderColumns + ` FROM orders WHERE reservation_id = $1 FOR UPDATE`,
	returnStock: `UPDATE sales SET stock = stock + $1, version = version + 1, updated_at_ms = $2
		WHERE id = $3 AND stock <= initial_stock - $4`,

	request:       `SELECT ` + restoreColumns + ` FROM restore_requests WHERE reservation_id = $1`,
	insertRequest: `INSERT INTO restore_requests (` + restoreColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
	reopenRequest: `UPDATE restore_requests SET state = $1, reason = $2, updated_at_ms = $3 WHERE reservation_id = $4`,
	updateRequest: `UPDATE restore_requests SET state = $1, attempts = attempts + 1, last_error = $2, alerted_at_ms = COALESCE(alerted_at_ms, $3), updated_at_ms = $4
		WHERE reservation_id = $5 AND state IN ($6, $7, $8)`,
	requestsByState: `SELECT ` + restoreColumns + ` FROM restore_requests
		WHERE state = $1 ORDER BY created_at_ms, reservation_id LIMIT $2`,
	requestsIn:         `SELECT reservation_id, reason FROM restore_requests WHERE reservation_id IN `,
	settleParked:       `UPDATE restore_requests SET state = $1, updated_at_ms = $2 WHERE state = $3 AND reservation_id IN `,
	ordersIn:           `SELECT ` + orderColumns + ` FROM orders WHERE reservation_id IN `,
	lockSuffix:         ` FOR UPDATE`,
	cancelOrdersIn:     `UPDATE orders SET status = $1, cancel_reason = $2, updated_at_ms = $3 WHERE status = $4 AND reservation_id IN `,
	reopenRequestsIn:   `UPDATE restore_requests SET state = $1, reason = $2, updated_at_ms = $3 WHERE reservation_id IN `,
	insertRequestsHead: `INSERT INTO restore_requests (` + restoreColumns + `) VALUES `,
	finishRequestsIn:   `UPDATE restore_requests SET state = $1, attempts = attempts + 1, last_error = $2, updated_at_ms = $3 WHERE reservation_id IN `,

	saleOrders: `SELECT ` + orderColumns + ` FROM orders
		WHERE sale_id = $1 ORDER BY created_at_ms, reservation_id`,
	saleFailedOrders: `SELECT ` + failedOrderSelect + ` FROM failed_orders
		WHERE sale_id = $1 ORDER BY created_at_ms, reservation_id`,
	saleRequests: `SELECT ` + restoreColumns + ` FROM restore_requests
		WHERE sale_id = $1 ORDER BY created_at_ms, reservation_id`,
}

// lockPostgresMigrations takes a session advisory lock keyed by the schema
// the migrations create their tables in, so migrations of different
// schemas of one database (as in tests) do not wait for each other.
func lockPostgresMigrations(ctx context.Context, conn *sql.Conn) (func() error, error) {
	var schema sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	if !schema.Valid {
		return nil, errors.New("no current schema: search_path names no existing schema")
	}
	h := fnv.New64a()
	h.Write([]byte("seckill_migrate:" + schema.String))
	key := int64(h.Sum64())
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return nil, err
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key)
		return err
	}, nil
}

// postgresPool opens an unsized pool on a PostgreSQL URL: any URL pgx
// accepts (postgres:// or postgresql://, with libpq parameters such as
// sslmode or search_path), with bounds b on every session unless b is nil.
func postgresPool(rawURL string, b *Bounds) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, err // pgx redacts the password
	}
	if b != nil {
		boundPostgres(cfg, *b)
	}
	return stdlib.OpenDB(*cfg), nil
}
