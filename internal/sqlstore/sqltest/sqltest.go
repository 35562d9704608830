// Package sqltest gives each test a database of its own: a fresh MySQL
// database or PostgreSQL schema on the shared test server (dropped when the
// test ends), or a SQLite file in the test's temporary directory. Tests can
// therefore run in parallel and never see each other's rows. The returned
// URLs are for sqlstore.Open; the databases are not migrated.
package sqltest

import (
	"context"
	"database/sql"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// MaxConns is the most connections a test's pool should keep to a shared
// server (sqlstore.DB.SetMaxConns). Several suites run at once on one
// machine, each with two packages' tests in flight; at production's 32 a
// pool, three of them ran PostgreSQL (max_connections 100) out of
// connections (SQLSTATE 53300). Eight still let every race of the suites
// run as many transactions at once as two cores can.
const MaxConns = 8

// cleanupTimeout bounds the DROP run after the test, whose own context is
// already cancelled by then.
const cleanupTimeout = 30 * time.Second

// SQLite returns the URL of a SQLite database file, not yet created, in a
// directory that does not exist yet either (Open creates both).
func SQLite(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "data", "seckill.db")
}

// MySQL creates a database for this test on the server of
// servicetest.MySQL and returns its URL, with the server URL's user and
// parameters. The database is dropped when the test ends. It skips the test
// (or fails it, when services are required) if the server is unreachable.
func MySQL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(servicetest.MySQL.URL(t))
	if err != nil {
		t.Fatalf("sqltest: parse %s: %v", servicetest.MySQL.EnvVar, err)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + addr + ")/?" + u.RawQuery)
	if err != nil {
		t.Fatalf("sqltest: parameters of %s: %v", servicetest.MySQL.EnvVar, err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	admin := sql.OpenDB(connector)

	name := servicetest.UniqueName("sk_test_")
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		admin.Close()
		t.Fatalf("sqltest: create mysql database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("sqltest: drop mysql database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// Postgres creates a schema for this test in the database of
// servicetest.Postgres and returns a URL whose search_path selects it. The
// schema is dropped, with everything in it, when the test ends. It skips
// the test (or fails it, when services are required) if the server is
// unreachable.
func Postgres(t testing.TB) string {
	t.Helper()
	base, u := postgresURL(t)
	name := servicetest.UniqueName("sk_test_")
	if err := pgExec(t.Context(), base, `CREATE SCHEMA "`+name+`"`); err != nil {
		t.Fatalf("sqltest: create postgres schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := pgExec(ctx, base, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("sqltest: drop postgres schema %s: %v", name, err)
		}
	})
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgresICU creates a database of its own for this test on the server of
// servicetest.Postgres, whose default collation is ICU's root locale
// rather than byte order (there "tea.b" sorts before "tea.C"), and returns
// its URL. The shared test server sorts in byte order (C.UTF-8); a
// production server created with a language's locale, as most are, does
// not, so a query that compares or sorts text the store then pages by
// must say its collation, and the tests on this database show whether it
// does. The database is dropped when the test ends. It skips the test (or
// fails it, when services are required) if the server is unreachable.
func PostgresICU(t testing.TB) string {
	t.Helper()
	base, u := postgresURL(t)
	name := servicetest.UniqueName("sk_test_icu_")
	if err := pgExec(t.Context(), base, `CREATE DATABASE "`+name+
		`" TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'und' LOCALE 'C.UTF-8'`); err != nil {
		t.Fatalf("sqltest: create postgres database %s with an ICU collation: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		// FORCE: a pool's idle connections must not keep it alive.
		if err := pgExec(ctx, base, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("sqltest: drop postgres database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// postgresURL is the URL of servicetest.Postgres, as text and parsed.
func postgresURL(t testing.TB) (string, *url.URL) {
	t.Helper()
	base := servicetest.Postgres.URL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("sqltest: parse %s: %v", servicetest.Postgres.EnvVar, err)
	}
	return base, u
}

func pgExec(ctx context.Context, url, stmt string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}
