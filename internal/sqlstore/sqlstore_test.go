package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testDialect is a dialect with the way to get a fresh database of it.
type testDialect struct {
	name string
	url  func(testing.TB) string
}

// dialects lists every dialect; dialects[1:] are the ones with a server.
var dialects = []testDialect{
	{"sqlite", sqltest.SQLite},
	{"mysql", sqltest.MySQL},
	{"postgres", sqltest.Postgres},
}

// collated is PostgreSQL on a database whose default collation is not
// byte order (sqltest.PostgresICU). The suites that page or sort by text
// run on it too.
var collated = testDialect{"postgres-icu", sqltest.PostgresICU}

// withCollated is dialects and collated.
func withCollated() []testDialect { return append(dialects[:len(dialects):len(dialects)], collated) }

// openDB opens the database at url, with a test's share of a shared
// server's connections, and closes it when the test ends.
func openDB(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	db.SetMaxConns(sqltest.MaxConns)
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// openMigrated opens a fresh, migrated database of a dialect.
func openMigrated(t *testing.T, url func(testing.TB) string) *DB {
	t.Helper()
	db := openDB(t, url(t))
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

// twoSQLiteHandles opens two handles, as two processes would have, on one
// fresh SQLite file that a has migrated.
func twoSQLiteHandles(t *testing.T) (a, b *DB) {
	t.Helper()
	url := sqltest.SQLite(t)
	a = openDB(t, url)
	if err := a.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a, openDB(t, url)
}

// onDialects runs test in a subtest per dialect of ds, each on a fresh
// migrated database with an order store on it.
func onDialects(t *testing.T, ds []testDialect, test func(t *testing.T, db *DB, st *OrderStore)) {
	t.Helper()
	for _, d := range ds {
		t.Run(d.name, func(t *testing.T) {
			db := openMigrated(t, d.url)
			test(t, db, NewOrderStore(db))
		})
	}
}

func TestSaleStore(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			conformance.SaleStore(t, func(t *testing.T) seckill.SaleStore {
				db := openMigrated(t, d.url)
				if got := db.Dialect(); got != d.name {
					t.Fatalf("Dialect() = %q, want %q", got, d.name)
				}
				return NewSaleStore(db)
			})
		})
	}
}

// TestCreateSaleValidates: the store refuses what the domain calls
// invalid, rather than storing it.
func TestCreateSaleValidates(t *testing.T) {
	store := NewSaleStore(openMigrated(t, sqltest.SQLite))
	s := &seckill.Sale{ID: "bad id", Name: "x", Stock: 1, PurchaseLimit: 1,
		StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	err := store.CreateSale(t.Context(), s)
	if code := seckill.ErrorCode(err); code != seckill.EINVALID {
		t.Fatalf("CreateSale(invalid id) = %v (code %q), want code %q", err, code, seckill.EINVALID)
	}
}

// TestCreateSaleClock: created_at comes from the injected clock, cut to
// the millisecond, in UTC.
func TestCreateSaleClock(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 6_789_999, time.FixedZone("x", 3600))
	db.Now = func() time.Time { return fixed }
	store := NewSaleStore(db)
	s := &seckill.Sale{ID: "clock", Name: "x", Stock: 1, PurchaseLimit: 1,
		StartAt: fixed, EndAt: fixed.Add(time.Hour)}
	if err := store.CreateSale(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	got, err := store.Sale(t.Context(), "clock")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2030, 1, 2, 2, 4, 5, 6_000_000, time.UTC)
	if !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want)
	}
	if !s.CreatedAt.Equal(got.CreatedAt) || !s.StartAt.Equal(got.StartAt) {
		t.Errorf("after CreateSale, s has CreatedAt %v, StartAt %v; stored %v, %v",
			s.CreatedAt, s.StartAt, got.CreatedAt, got.StartAt)
	}
}

// TestStockNeverNegative: the schema itself refuses to take stock below
// zero or above what was put on sale, whatever the code above it does.
func TestStockNeverNegative(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		createSale(t, db, "tea", 2)
		where := " WHERE id = " + (&db.dialect.sql.orders).bind(1)
		for _, set := range []string{"stock = stock - 3", "stock = stock + 1"} {
			_, err := db.write.ExecContext(t.Context(), "UPDATE sales SET "+set+where, "tea")
			if err == nil {
				t.Errorf("UPDATE sales SET %s succeeded on a sale of 2, want a check violation", set)
			}
		}
		if _, err := db.write.ExecContext(t.Context(), "UPDATE sales SET stock = stock - 2"+where, "tea"); err != nil {
			t.Errorf("selling the whole stock: %v", err)
		}
	})
}

// TestSQLiteWritersNeverLocked: two handles on one file (as two processes
// would have), each writing from many goroutines, never see "database is
// locked": writes queue on each handle's one write connection, and between
// handles on busy_timeout with transactions that take the lock up front.
func TestSQLiteWritersNeverLocked(t *testing.T) {
	a, b := twoSQLiteHandles(t)
	const goroutines, each = 8, 25
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for h, db := range []*DB{a, b} {
		store := NewSaleStore(db)
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					s := &seckill.Sale{ID: fmt.Sprintf("s%d_%d_%d", h, g, i), Name: "x", Stock: 1, PurchaseLimit: 1,
						StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
					if err := store.CreateSale(t.Context(), s); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					// Reads beside the writes, on the read pool.
					if _, err := store.SalesStartingBefore(t.Context(), time.Now(), time.Now()); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("concurrent write: %v", err)
	}
	var n int
	if err := a.read.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM sales").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := 2 * goroutines * each; n != want {
		t.Errorf("%d sales stored, want %d", n, want)
	}
}

// TestSQLiteReadPoolIsReadOnly: a write that strays onto the read pool
// fails instead of competing with the writer for the lock.
func TestSQLiteReadPoolIsReadOnly(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	if _, err := db.read.ExecContext(t.Context(), "DELETE FROM sales"); err == nil {
		t.Fatal("a write on the read pool succeeded")
	}
}

func TestSQLiteMemory(t *testing.T) {
	db := openDB(t, "sqlite::memory:")
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	store := NewSaleStore(db)
	s := &seckill.Sale{ID: "m", Name: "x", Stock: 1, PurchaseLimit: 1, StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	if err := store.CreateSale(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Sale(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteFile: Open creates the file and its missing directories, with
// the journal in WAL mode; Close may be called twice.
func TestSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "seckill.db")
	db, err := Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("after Open: %v", err)
	}
	var mode string
	if err := db.read.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, url := range []string{
		"",
		"seckill.db",
		"redis://127.0.0.1:6379",
		"sqlite:",
		"sqlite://",
		"mysql://root:s3cret@127.0.0.1:3306",
		"mysql://root:s3cret@/db",
		"mysql://root:s3cret@127.0.0.1:1/db", // nothing listens on port 1
		"mysql://root:s3cret@127.0.0.1:3306/db?timeout=notaduration",
		"postgres://postgres:s3cret@127.0.0.1:1/db",
		"postgres://postgres:s3cret@127.0.0.1:5432/db?sslmode=bogus",
	} {
		db, err := Open(ctx, url)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", url, err)
		}
		if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("Open(%q) error is capitalised: %v", url, err)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewSaleStore(db).Sale(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Sale with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestSaleAdmin(t *testing.T) {
	onDialects(t, withCollated(), func(t *testing.T, db *DB, _ *OrderStore) {
		store := NewSaleStore(db)
		conformance.SaleAdmin(t, func(*testing.T) conformance.SaleAdminStore { return store })
	})
}

// TestSetMaxConns: a server's pool starts at DefaultMaxConns and takes the
// cap it is given; SQLite keeps its one writer.
func TestSetMaxConns(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			db, err := Open(t.Context(), d.url(t)) // not openDB, which caps the pool
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			want := DefaultMaxConns
			if d.name == "sqlite" {
				want = 1
			}
			if got := db.MaxConns(); got != want {
				t.Errorf("MaxConns() after Open = %d, want %d", got, want)
			}
			db.SetMaxConns(3)
			if d.name != "sqlite" {
				want = 3
			}
			if got := db.MaxConns(); got != want {
				t.Errorf("MaxConns() after SetMaxConns(3) = %d, want %d", got, want)
			}
			db.SetMaxConns(0)
			if got := db.MaxConns(); got != want {
				t.Errorf("MaxConns() after SetMaxConns(0) = %d, want %d (ignored)", got, want)
			}
			if err := db.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
