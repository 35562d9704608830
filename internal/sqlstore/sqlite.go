package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var sqliteDialect = &dialect{
	name: "sqlite",
	sql:  sqliteSQL,
	isUniqueViolation: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) &&
			(e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	},
	isUnavailable: func(err error) bool {
		var e *sqlite.Error
		// The file is locked past the busy timeout, or the disk is full or
		// failing: retry later rather than a bare 500.
		if !errors.As(err, &e) {
			return false
		}
		switch e.Code() & 0xff { // primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN:
			return true
		}
		return false
	},
	// Nothing is transient: the single write connection and IMMEDIATE
	// transactions leave no deadlock to break.
	isTransient: func(error) bool { return false },
	// SQLite has one writer per file. Every transaction of the write pool
	// begins IMMEDIATE, taking the write lock up front, and each migration
	// re-checks schema_migrations inside its transaction: that is the lock.
	lockMigrations: func(context.Context, *sql.Conn) (func() error, error) {
		return func() error { return nil }, nil
	},
}

// sqliteBusyTimeout is how long (ms) a connection waits for another
// process's write lock before failing. Within this process writes queue on
// the single write connection and never wait here.
const sqliteBusyTimeout = "10000"

// sqliteParams are the driver parameters of every connection. WAL lets
// readers run beside the writer; synchronous=NORMAL is durable across a
// process crash (not a power cut) under WAL and much faster than FULL.
//
// temp_store=MEMORY keeps the statement journal in memory: each multi-row
// INSERT of the order writer runs inside a larger transaction and may fail
// on a constraint, so SQLite journals the pages it changes to undo that
// one statement, and past 64 KiB it spilled them to a temporary file, a
// pwrite per page (10 % of the writer's CPU). The journal is scratch, never
// read after the statement ends, so durability is unchanged. A URL's
// _pragma values add to these, and replace one of the same name.
var sqliteParams = url.Values{
	"_busy_timeout": {sqliteBusyTimeout},
	"_foreign_keys": {"1"},
	"_journal_mode": {"WAL"},
	"_synchronous":  {"NORMAL"},
	"_pragma":       {"temp_store(memory)"},
	// IMMEDIATE takes the write lock at BEGIN. A DEFERRED transaction
	// that reads and then writes can fail with SQLITE_BUSY at once, since
	// waiting could deadlock; busy_timeout cannot help it.
	"_txlock": {"immediate"},
}

// parseSQLiteURL splits sqlite:PATH[?params] (or sqlite://PATH…) into the
// file path and the driver parameters, the caller's over the defaults.
func parseSQLiteURL(rawURL string) (path string, params url.Values, err error) {
	rest := rawURL[len("sqlite:"):]
	rest = strings.TrimPrefix(rest, "//")
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" {
		return "", nil, errors.New("url has no file path (want sqlite:PATH)")
	}
	params = url.Values{}
	for k, v := range sqliteParams {
		params[k] = v
	}
	if rawQuery != "" {
		extra, err := url.ParseQuery(rawQuery)
		if err != nil {
			return "", nil, fmt.Errorf("bad url parameters: %w", err)
		}
		for k, v := range extra {
			if k == "_pragma" {
				v = mergePragmas(params[k], v)
			}
			params[k] = v
		}
	}
	return path, params, nil
}

// mergePragmas is the defaults' _pragma values with the caller's added,
// a caller's pragma replacing the default of its name (the driver runs
// them sorted, not in order, so both could not simply be passed).
func mergePragmas(defaults, caller []string) []string {
	name := func(p string) string {
		n, _, _ := strings.Cut(p, "(")
		n, _, _ = strings.Cut(n, "=")
		return strings.ToLower(strings.TrimSpace(n))
	}
	var out []string
	for _, d := range defaults {
		if !slices.ContainsFunc(caller, func(c string) bool { return name(c) == name(d) }) {
			out = append(out, d)
		}
	}
	return append(out, caller...)
}

// sqliteFile opens an unsized pool on the file at path, creating its
// directory if missing.
func sqliteFile(path string, params url.Values) (*sql.DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create directory: %w", err)
		}
	}
	return sql.Open("sqlite", path+"?"+params.Encode())
}

func openSQLite(rawURL string) (*DB, error) {
	path, params, err := parseSQLiteURL(rawURL)
	if err != nil {
		return nil, err
	}
	memory := path == ":memory:"
	var write *sql.DB
	if memory {
		// No WAL for memory databases.
		params.Del("_journal_mode")
		write, err = sql.Open("sqlite", path+"?"+params.Encode())
	} else {
		write, err = sqliteFile(path, params)
	}
	if err != nil {
		return nil, err
	}
	// One write connection, never closed. A memory database lives and
	// dies with it, and serves the reads too.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if memory {
		return &DB{dialect: sqliteDialect, write: write, read: write}, nil
	}

	// Readers never write, and never need the journal mode set again
	// (it is a property of the file, set by the writer).
	params.Del("_journal_mode")
	params.Set("_txlock", "deferred")
	params.Set("_query_only", "1")
	read, err := sql.Open("sqlite", path+"?"+params.Encode())
	if err != nil {
		write.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	return &DB{dialect: sqliteDialect, write: write, read: read}, nil
}
