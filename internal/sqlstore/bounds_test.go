package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// testBounds are short enough for a test to wait them out.
var testBounds = Bounds{
	StatementTimeout: 3 * time.Second,
	LockTimeout:      time.Second,
	IdleTxTimeout:    2 * time.Second,
	ConnectTimeout:   5 * time.Second,
	KeepAlive:        5 * time.Second,
}

func openBounded(t *testing.T, url string, b Bounds) *DB {
	t.Helper()
	db, err := OpenBounded(t.Context(), url, b)
	if err != nil {
		t.Fatalf("OpenBounded: %v", err)
	}
	db.SetMaxConns(sqltest.MaxConns)
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestBoundsSetOnEverySession: the session variables are Bounds', on every
// connection of the pool, and a variable the URL sets itself wins.
func TestBoundsSetOnEverySession(t *testing.T) {
	cases := map[string]struct {
		url    func(testing.TB) string
		param  string // a URL parameter overriding one bound
		checks map[string]string
	}{
		"postgres": {sqltest.Postgres, "lock_timeout=4500", map[string]string{
			"SHOW statement_timeout":                   "3s",
			"SHOW lock_timeout":                        "4500ms",
			"SHOW idle_in_transaction_session_timeout": "2s",
			"SHOW tcp_keepalives_idle":                 "5",
			"SHOW tcp_keepalives_count":                "3",
		}},
		"mysql": {sqltest.MySQL, "innodb_lock_wait_timeout=7", map[string]string{
			"SELECT @@SESSION.innodb_lock_wait_timeout": "7",
			"SELECT @@SESSION.idle_transaction_timeout": "2",
			"SELECT @@SESSION.max_statement_time":       "3",
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			url := c.url(t)
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			db := openBounded(t, url+sep+c.param, testBounds)
			// Several connections at once: each must have them.
			conns := make([]*sql.Conn, 3)
			for i := range conns {
				conn, err := db.write.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conns[i] = conn
			}
			for i, conn := range conns {
				for q, want := range c.checks {
					var got string
					if err := conn.QueryRowContext(t.Context(), q).Scan(&got); err != nil {
						t.Fatalf("conn %d: %s: %v", i, q, err)
					}
					if got != want {
						t.Errorf("conn %d: %s = %q; want %q", i, q, got, want)
					}
				}
			}
		})
	}
}

// TestBoundsEndAHostage: a session that took the sale's row lock and went
// silent inside its transaction (its node cut off or paused) is ended by
// the server after IdleTxTimeout; another writer waiting for the row is
// told so after LockTimeout (unavailable, retry), and gets it once the
// hostage-taker is gone. Without the bounds the second writer waits as
// long as the first stays silent.
func TestBoundsEndAHostage(t *testing.T) {
	for _, d := range dialects[1:] {
		t.Run(d.name, func(t *testing.T) {
			db := openBounded(t, d.url(t), testBounds)
			sale := createSale(t, db, "hostage", 10)
			q := func(s string) string {
				if d.name == "postgres" {
					return s
				}
				return strings.ReplaceAll(s, "$1", "?")
			}
			hostage, err := db.write.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer hostage.Rollback()
			if _, err := hostage.ExecContext(t.Context(), q(`UPDATE sales SET stock = stock - 1 WHERE id = $1`), sale.ID); err != nil {
				t.Fatal(err)
			}
			took := time.Now()
			// The hostage-taker says nothing more. A second writer:
			_, err = db.write.ExecContext(t.Context(), q(`UPDATE sales SET stock = stock - 1 WHERE id = $1`), sale.ID)
			waited := time.Since(took)
			if err == nil {
				t.Fatalf("the second writer got the row after %s while the first held it", waited)
			}
			if c := seckill.ErrorCode(db.classify(err)); c != seckill.EUNAVAILABLE {
				t.Errorf("lock wait timeout classified %q (%v); want unavailable", c, err)
			}
			servicetest.WantWithin(t, fmt.Sprintf("the second writer's wait (lock timeout %s)", testBounds.LockTimeout), waited, testBounds.LockTimeout+2*time.Second)
			// Retried until the server ends the silent session.
			deadline := time.Now().Add(testBounds.IdleTxTimeout + 10*time.Second)
			for {
				_, err = db.write.ExecContext(t.Context(), q(`UPDATE sales SET stock = stock - 1 WHERE id = $1`), sale.ID)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the row was still locked %s after the hostage-taker went silent: %v", time.Since(took), err)
				}
			}
			t.Logf("%s: the second writer got the row %s after the first went silent (idle transaction bound %s)", d.name, time.Since(took).Round(time.Millisecond), testBounds.IdleTxTimeout)
			// The hostage-taker's transaction was rolled back: its late
			// commit fails and changes nothing.
			if err := hostage.Commit(); err == nil {
				t.Error("the silent session's late commit succeeded")
			}
			var stock int64
			if err := db.read.QueryRowContext(context.Background(), q(`SELECT stock FROM sales WHERE id = $1`), sale.ID).Scan(&stock); err != nil {
				t.Fatal(err)
			}
			if stock != 9 {
				t.Errorf("stock %d; want 9 (only the second writer's update)", stock)
			}
		})
	}
}
