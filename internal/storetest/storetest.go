// Package storetest starts what the tests of code that spans the stock
// store and the database need: a stock store on a private redis-server,
// with a raw client to break it, and a migrated SQLite database.
package storetest

import (
	"path/filepath"
	"testing"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// Stock is a stock store on a private redis-server, and a raw client to it
// for breaking things (a FLUSHALL, a lost key); both close when the test
// ends. Without redis-server installed the test skips, or fails under
// SECKILL_TEST_REQUIRE_SERVICES (redistest.StartServer).
func Stock(t testing.TB) (*redis.Store, rueidis.Client) {
	t.Helper()
	srv := redistest.StartServer(t)
	stock, err := redis.New(t.Context(), "redis://"+srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stock.Close)
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	return stock, raw
}

// SQLite is a migrated SQLite database in the test's temporary directory,
// closed when the test ends.
func SQLite(t testing.TB) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}
