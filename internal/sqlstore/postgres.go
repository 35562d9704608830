package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

var postgresDialect = &dialect{
	name: "postgres",
	sql:  postgresSQL,
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
	isTransient: func(err error) bool {
		var e *pgconn.PgError
		// serialization_failure (under a stricter default isolation than
		// READ COMMITTED), deadlock_detected, lock_not_available (the
		// session's lock_timeout: the row's holder may be a node cut off
		// inside its transaction, ended by idle_in_transaction_session_timeout).
		return errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01" || e.Code == "55P03")
	},
	lockMigrations: lockPostgresMigrations,
	unbound:        unboundPostgres,
}

// lockPostgresMigrations takes a session advisory lock keyed by the schema
// the migrations create their tables in, so migrations of different
// schemas of one database (as in tests) do not wait for each other.
//
// It tries again and again rather than wait in pg_advisory_lock: a
// session blocked there is a transaction in progress, which the lock
// holder's CREATE INDEX CONCURRENTLY waits for, while it waits for the
// lock: a deadlock. Each try is over at once.
func lockPostgresMigrations(ctx context.Context, conn *sql.Conn) (func() error, error) {
	var schema sql.NullString
	if err := conn.QueryRowContext(ctx, postgresSQL.migrations.currentSchema).Scan(&schema); err != nil {
		return nil, err
	}
	if !schema.Valid {
		return nil, errors.New("no current schema: search_path names no existing schema")
	}
	h := fnv.New64a()
	h.Write([]byte("seckill_migrate:" + schema.String))
	key := int64(h.Sum64())
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var got bool
		if err := conn.QueryRowContext(ctx, postgresSQL.migrations.lock, key).Scan(&got); err != nil {
			return nil, err
		}
		if got {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, postgresSQL.migrations.unlock, key)
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
