package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Migrations live in migrations/<dialect>/NNNN_name.up.sql. Every dialect
// has the same numbered list; a test checks it. There are no down
// migrations: a bad migration is fixed by a later one.
//
//go:embed migrations
var migrationFiles embed.FS

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.up\.sql$`)

type migration struct {
	version int64
	name    string // e.g. "sales"
	sql     string
	noTx    bool // noTxMarker: outside a transaction, one statement at a time
}

// noTxMarker, as a line of its own in a migration, runs it outside a
// transaction, one statement at a time: for PostgreSQL's CREATE INDEX
// CONCURRENTLY, which builds an index without holding back the table's
// writes and which a transaction refuses. A process stopped after the
// statements and before the migration is recorded runs them again, so
// they must be safe to repeat: DROP INDEX CONCURRENTLY IF EXISTS (also
// what a failed concurrent build leaves: an invalid index), then CREATE
// INDEX CONCURRENTLY.
const noTxMarker = "-- seckill:no-transaction"

// loadMigrations returns the dialect's migrations in order. Versions must
// run 1, 2, 3, … without gaps, so a misnamed file fails loudly instead of
// being skipped.
func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name, so by version
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration %s/%s: name is not NNNN_name.up.sql", dialect, e.Name())
		}
		version, _ := strconv.ParseInt(m[1], 10, 64)
		if want := int64(len(ms) + 1); version != want {
			return nil, fmt.Errorf("migration %s/%s: version %d, want %d (versions run 1, 2, 3, … without gaps)", dialect, e.Name(), version, want)
		}
		text, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s/%s: %w", dialect, e.Name(), err)
		}
		noTx := slices.ContainsFunc(strings.Split(string(text), "\n"), func(l string) bool { return strings.TrimSpace(l) == noTxMarker })
		ms = append(ms, migration{version: version, name: m[2], sql: string(text), noTx: noTx})
	}
	return ms, nil
}

// Migrate brings the schema up to date. It is idempotent, and safe when
// several processes migrate the same database at once: they take a lock
// (MySQL GET_LOCK, a PostgreSQL advisory lock, SQLite's single writer),
// and each migration re-checks schema_migrations inside its transaction.
// Each migration is applied in one transaction together with its
// schema_migrations row (on MySQL, whose DDL commits implicitly, that
// protects only the data statements), except those marked noTxMarker.
func (db *DB) Migrate(ctx context.Context) error {
	ms, err := loadMigrations(db.dialect.name)
	if err != nil {
		return err
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	// A schema change may take long and wait for locks: the session runs
	// without the statement and lock bounds, and is not given back to
	// the pool afterwards.
	if len(db.dialect.unbound) > 0 {
		defer discard(conn)
		for _, s := range db.dialect.unbound {
			_, _ = conn.ExecContext(ctx, s) // a variable the server lacks is no bound to lift
		}
	}

	unlock, err := db.dialect.lockMigrations(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	err = db.migrate(ctx, conn, ms)
	if uerr := unlock(); uerr != nil {
		// A lock we could not release must not go back to the pool with
		// its session: dropping the connection releases it.
		discard(conn)
		if err == nil {
			err = fmt.Errorf("migrate: unlock: %w", uerr)
		}
	}
	return err
}

func (db *DB) migrate(ctx context.Context, conn *sql.Conn, ms []migration) error {
	q := &db.dialect.sql.migrations
	if _, err := conn.ExecContext(ctx, q.createTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := db.applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate: %04d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// applyMigration applies m unless schema_migrations has it: in one
// transaction with its row, or, marked noTxMarker, one statement at a
// time on conn and then its row (the migration lock keeps another process
// from running it meanwhile).
func (db *DB) applyMigration(ctx context.Context, conn *sql.Conn, m migration) error {
	if m.noTx {
		return db.runMigration(ctx, conn, m, splitStatements(m.sql))
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	stmts := []string{m.sql}
	if db.dialect.oneStatementPerExec {
		stmts = splitStatements(m.sql)
	}
	if err := db.runMigration(ctx, tx, m, stmts); err != nil {
		return err
	}
	return tx.Commit()
}

// migrationSession is where a migration runs: its transaction, or the
// migrating connection itself (*sql.Tx, *sql.Conn).
type migrationSession interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runMigration checks schema_migrations, runs stmts and records m, on s.
func (db *DB) runMigration(ctx context.Context, s migrationSession, m migration, stmts []string) error {
	q := &db.dialect.sql.migrations
	var applied int
	if err := s.QueryRowContext(ctx, q.applied, m.version).Scan(&applied); err != nil {
		return fmt.Errorf("check schema_migrations: %w", err)
	}
	if applied > 0 {
		return nil
	}
	for _, stmt := range stmts {
		if _, err := s.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if _, err := s.ExecContext(ctx, q.record, m.version, m.name, db.now().UnixMilli()); err != nil {
		return fmt.Errorf("record in schema_migrations: %w", err)
	}
	return nil
}

// splitStatements cuts a migration into statements at each ';' that is not
// inside a quoted string, a quoted identifier or a comment. It serves MySQL,
// whose driver runs one statement per Exec unless multiStatements is on, and
// we keep that off for every other query. It knows nothing of stored
// programs (DELIMITER) on purpose: migrations do not define any.
func splitStatements(text string) []string {
	var (
		stmts []string
		start int
		quote byte // the open quote character, or 0
	)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			switch {
			case c == '\\' && quote != '`':
				i++ // MySQL escapes the next character in strings
			case c == quote && i+1 < len(text) && text[i+1] == quote:
				i++ // doubled quote
			case c == quote:
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '#' || (c == '-' && strings.HasPrefix(text[i:], "--")):
			if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(text)
			}
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			if j := strings.Index(text[i+2:], "*/"); j >= 0 {
				i += j + 3
			} else {
				i = len(text)
			}
		case c == ';':
			stmts = appendStatement(stmts, text[start:i])
			start = i + 1
		}
	}
	return appendStatement(stmts, text[start:])
}

// appendStatement appends s unless it holds nothing but space and comments.
func appendStatement(stmts []string, s string) []string {
	s = strings.TrimSpace(s)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") && !strings.HasPrefix(line, "#") {
			return append(stmts, s)
		}
	}
	return stmts
}

// discard closes conn's underlying connection instead of returning it to
// the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}
