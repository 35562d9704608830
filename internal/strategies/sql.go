package strategies

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// SQL is a database the SQL strategies run on, through a pool of many
// connections: the point is to let buyers race as they would on a real
// server.
type SQL struct {
	db      *sql.DB
	dialect string // "mysql", "postgres" or "sqlite"
}

// DefaultSQLConns is the pool size of OpenSQL when conns is 0.
const DefaultSQLConns = 64

// OpenSQL connects to mysql://user:pass@host:port/db, postgres://… or
// sqlite:PATH (the URLs of sqlstore.Open) with a pool of conns connections
// (SQLite: at most sqlstore.MaxSQLitePool). It writes nothing until a
// strategy is created.
//
// SQLite serialises writers on the file, so the pool is what makes a race
// possible at all: each statement runs on whichever connection is free,
// with no transaction around the naive read and write.
func OpenSQL(ctx context.Context, rawURL string, conns int) (*SQL, error) {
	if conns <= 0 {
		conns = DefaultSQLConns
	}
	db, dialect, err := sqlstore.OpenPool(ctx, rawURL, conns)
	if err != nil {
		return nil, err
	}
	return &SQL{db: db, dialect: dialect}, nil
}

// Dialect is "mysql", "postgres" or "sqlite".
func (s *SQL) Dialect() string { return s.dialect }

// Close closes the pool.
func (s *SQL) Close() error { return s.db.Close() }

// bind rewrites ? placeholders for PostgreSQL.
func (s *SQL) bind(q string) string {
	if s.dialect != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// table is one strategy's single-row stock table.
type table struct {
	s    *SQL
	name string

	once sync.Once
	err  error
}

func (s *SQL) newTable(ctx context.Context, stock int64) (*table, error) {
	t := &table{s: s, name: uniqueName("sk_cmp_")}
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE "+t.name+
		" (id INTEGER NOT NULL PRIMARY KEY, stock BIGINT NOT NULL, version BIGINT NOT NULL)"); err != nil {
		return nil, fmt.Errorf("create table %s: %w", t.name, err)
	}
	if _, err := s.db.ExecContext(ctx, s.bind("INSERT INTO "+t.name+" (id, stock, version) VALUES (1, ?, 0)"), stock); err != nil {
		t.Close(ctx)
		return nil, fmt.Errorf("insert stock into %s: %w", t.name, err)
	}
	return t, nil
}

func (t *table) Remaining(ctx context.Context) (int64, error) {
	var n int64
	if err := t.s.db.QueryRowContext(ctx, "SELECT stock FROM "+t.name+" WHERE id = 1").Scan(&n); err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return n, nil
}

func (t *table) Close(ctx context.Context) error {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := t.s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.name); err != nil {
			t.err = fmt.Errorf("drop table %s: %w", t.name, err)
		}
	})
	return t.err
}

// Naive reads the stock, and if some is left decrements it in a second
// statement: no transaction, no lock, no condition. Two buyers who both
// read 1 both buy. This is the bug the other strategies exist to avoid.
func (s *SQL) Naive(ctx context.Context, stock int64) (Strategy, error) {
	t, err := s.newTable(ctx, stock)
	if err != nil {
		return nil, err
	}
	return &naive{table: t,
		read:  "SELECT stock FROM " + t.name + " WHERE id = 1",
		write: "UPDATE " + t.name + " SET stock = stock - 1 WHERE id = 1",
	}, nil
}

type naive struct {
	*table
	read, write string
}

func (n *naive) Reserve(ctx context.Context, _ string) (bool, error) {
	var left int64
	if err := n.s.db.QueryRowContext(ctx, n.read).Scan(&left); err != nil {
		return false, fmt.Errorf("read stock: %w", err)
	}
	if left <= 0 {
		return false, nil
	}
	if _, err := n.s.db.ExecContext(ctx, n.write); err != nil {
		return false, fmt.Errorf("write stock: %w", err)
	}
	return true, nil
}

// Conditional takes a unit with one statement that checks and decrements:
// UPDATE … SET stock = stock - 1 WHERE stock > 0. The row lock makes it
// correct; every buyer queues on that one row.
func (s *SQL) Conditional(ctx context.Context, stock int64) (Strategy, error) {
	t, err := s.newTable(ctx, stock)
	if err != nil {
		return nil, err
	}
	return &conditional{table: t,
		take: "UPDATE " + t.name + " SET stock = stock - 1 WHERE id = 1 AND stock > 0"}, nil
}

type conditional struct {
	*table
	take string
}

func (c *conditional) Reserve(ctx context.Context, _ string) (bool, error) {
	res, err := c.s.db.ExecContext(ctx, c.take)
	if err != nil {
		return false, fmt.Errorf("take stock: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take stock: %w", err)
	}
	return n == 1, nil
}

// Optimistic reads stock and version, then decrements only if the version
// is unchanged (UPDATE … WHERE version = ?), and starts over when another
// buyer got there first. It is correct; under a stampede most attempts
// conflict. A conflict means some other buyer took a unit, so each buyer
// retries at most stock times.
func (s *SQL) Optimistic(ctx context.Context, stock int64) (Strategy, error) {
	t, err := s.newTable(ctx, stock)
	if err != nil {
		return nil, err
	}
	return &optimistic{table: t,
		read: "SELECT stock, version FROM " + t.name + " WHERE id = 1",
		take: s.bind("UPDATE " + t.name + " SET stock = stock - 1, version = version + 1 WHERE id = 1 AND version = ?"),
	}, nil
}

type optimistic struct {
	*table
	read, take string
}

func (o *optimistic) Reserve(ctx context.Context, _ string) (bool, error) {
	for {
		var left, version int64
		if err := o.s.db.QueryRowContext(ctx, o.read).Scan(&left, &version); err != nil {
			return false, fmt.Errorf("read stock: %w", err)
		}
		if left <= 0 {
			return false, nil
		}
		res, err := o.s.db.ExecContext(ctx, o.take, version)
		if err != nil {
			return false, fmt.Errorf("take stock: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return false, fmt.Errorf("take stock: %w", err)
		} else if n == 1 {
			return true, nil
		}
	}
}
