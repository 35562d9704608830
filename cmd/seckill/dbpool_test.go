package main

import (
	"strings"
	"testing"

	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestDatabaseMaxConns: --database-max-conns caps this process's pool on
// a database server (nodes × the cap must fit the server's
// max_connections), and a cap below 1 is refused before anything opens.
func TestDatabaseMaxConns(t *testing.T) {
	bad := DefaultConfig()
	for _, n := range []int{0, -1} {
		bad.DatabaseMaxConns = n
		if _, err := bad.parse(); err == nil || !strings.Contains(err.Error(), "database max conns") {
			t.Errorf("--database-max-conns %d: parse() = %v, want an error naming it", n, err)
		}
	}
	e := startEngine(t, func(c *Config) { c.DatabaseURL, c.DatabaseMaxConns = sqltest.MySQL(t), 5 })
	if got := e.m.db.MaxConns(); got != 5 {
		t.Errorf("serve with --database-max-conns 5: the pool holds up to %d connections", got)
	}
}
