package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Bounds are the limits seckill sets on every session it opens to a
// MySQL/MariaDB or PostgreSQL server, so that no session can hold the
// others hostage: a node cut off (or paused) inside a transaction keeps
// the sale's row locked for every other node's writer until the server
// ends its session, and without these the server waits for TCP keepalive
// (about 2 h 11 min on Linux) or wait_timeout (8 h on MariaDB).
//
// A parameter the database URL sets itself (PostgreSQL's
// ?statement_timeout=…, a MySQL session variable ?innodb_lock_wait_timeout=…)
// wins over these. SQLite has no sessions to bound; Bounds do not apply.
type Bounds struct {
	// StatementTimeout is the longest one statement may run: PostgreSQL
	// statement_timeout, MariaDB max_statement_time, MySQL
	// max_execution_time (SELECTs only). It must exceed the longest read
	// seckill makes (the reconciliation of a large sale). Migrations run
	// without it.
	StatementTimeout time.Duration
	// LockTimeout is the longest one statement waits for a lock:
	// PostgreSQL lock_timeout, InnoDB innodb_lock_wait_timeout (whole
	// seconds, at least 1). A writer that times out tries its batch again
	// from the start.
	LockTimeout time.Duration
	// IdleTxTimeout ends a session that has left a transaction open and
	// silent this long (its client cut off, paused or stuck), rolling the
	// transaction back and releasing its locks: PostgreSQL
	// idle_in_transaction_session_timeout, MariaDB
	// idle_transaction_timeout (whole seconds). MySQL has no such
	// variable; there it is the session's wait_timeout, which ends any
	// silent session, in a transaction or not (the pool then opens a new
	// one).
	IdleTxTimeout time.Duration
	// ConnectTimeout bounds opening one connection (the dial and the
	// handshake), unless the URL sets its own (connect_timeout, timeout).
	ConnectTimeout time.Duration
	// KeepAlive is the TCP keepalive idle time and probe interval of
	// both ends of every connection (three probes), so a peer that
	// vanished without a reset is noticed in about 4 × KeepAlive when
	// nothing else notices it first: the client's dialer, and PostgreSQL's
	// tcp_keepalives_idle/interval/count.
	KeepAlive time.Duration
}

// DefaultBounds are the bounds Open sets. A writer's transaction takes
// milliseconds, so 5 s of silence inside one means its node is gone; the
// statement timeout is the reconciliation route's budget (2 min), the
// longest read seckill makes.
var DefaultBounds = Bounds{
	StatementTimeout: 2 * time.Minute,
	LockTimeout:      3 * time.Second,
	IdleTxTimeout:    5 * time.Second,
	ConnectTimeout:   5 * time.Second,
	KeepAlive:        5 * time.Second,
}

// keepAliveProbes is the number of unanswered keepalive probes after which
// a connection is dropped.
const keepAliveProbes = 3

// Validate reports a bound that is not positive.
func (b Bounds) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"statement timeout", b.StatementTimeout},
		{"lock timeout", b.LockTimeout},
		{"idle transaction timeout", b.IdleTxTimeout},
		{"connect timeout", b.ConnectTimeout},
		{"keepalive", b.KeepAlive},
	} {
		if f.d <= 0 {
			return fmt.Errorf("database %s %s: want a positive duration", f.name, f.d)
		}
	}
	return nil
}

// dialer is the client end's TCP settings.
func (b Bounds) dialer() *net.Dialer {
	return &net.Dialer{
		Timeout: b.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: b.KeepAlive, Interval: b.KeepAlive, Count: keepAliveProbes,
		},
	}
}

// millis is d in whole milliseconds, at least 1, as PostgreSQL and MySQL
// take them.
func millis(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// seconds is d in whole seconds, rounded up, at least 1.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}

// boundPostgres sets b on cfg: the session parameters go in the startup
// message, so every connection has them from its first statement.
func boundPostgres(cfg *pgx.ConnConfig, b Bounds) {
	params := map[string]string{
		"statement_timeout":                   millis(b.StatementTimeout),
		"lock_timeout":                        millis(b.LockTimeout),
		"idle_in_transaction_session_timeout": millis(b.IdleTxTimeout),
		"tcp_keepalives_idle":                 seconds(b.KeepAlive),
		"tcp_keepalives_interval":             seconds(b.KeepAlive),
		"tcp_keepalives_count":                strconv.Itoa(keepAliveProbes),
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range params {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = b.ConnectTimeout
	}
	cfg.DialFunc = b.dialer().DialContext
}

// unboundPostgres lifts the bounds a migration must not meet: a schema
// change may take long, and waits for the migration lock.
var unboundPostgres = []string{`SET statement_timeout = 0`, `SET lock_timeout = 0`, `SET idle_in_transaction_session_timeout = 0`}

// boundMySQL sets b on cfg: the client's read and write timeouts, the
// dial; the session variables are set by the connector boundMySQL wraps
// around each new connection (mysqlSession), since MariaDB and MySQL name
// them differently.
func boundMySQL(cfg *mysql.Config, b Bounds) {
	if cfg.Timeout == 0 {
		cfg.Timeout = b.ConnectTimeout
	}
	// A read waits for a statement's answer: the statement's own bound,
	// and some slack for the network.
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = b.StatementTimeout + 5*time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = b.StatementTimeout + 5*time.Second
	}
	d := b.dialer()
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}

// mysqlSession is a connector that sets Bounds' session variables on every
// new connection, in the names of the server's flavour (MariaDB or MySQL),
// learnt from the first connection that tries MariaDB's.
type mysqlSession struct {
	driver.Connector
	bounds Bounds
	skip   map[string]string // variables the URL sets itself
	flavor atomic.Int32      // 0 unknown, 1 MariaDB, 2 MySQL
}

const (
	flavorMariaDB = 1
	flavorMySQL   = 2
)

// statements are the SET statements of flavor f (which sets the variables
// both flavours have, first).
func (c *mysqlSession) statements(f int32) []string {
	vars := [][2]string{{"innodb_lock_wait_timeout", seconds(c.bounds.LockTimeout)}}
	switch f {
	case flavorMariaDB:
		vars = append(vars,
			[2]string{"idle_transaction_timeout", seconds(c.bounds.IdleTxTimeout)},
			[2]string{"max_statement_time", strconv.FormatFloat(c.bounds.StatementTimeout.Seconds(), 'f', 3, 64)})
	case flavorMySQL:
		vars = append(vars,
			[2]string{"wait_timeout", seconds(c.bounds.IdleTxTimeout)},
			[2]string{"max_execution_time", millis(c.bounds.StatementTimeout)})
	}
	var out []string
	for _, v := range vars {
		if _, set := c.skip[v[0]]; !set {
			out = append(out, "SET SESSION "+v[0]+" = "+v[1])
		}
	}
	return out
}

// Connect opens a connection and bounds its session.
func (c *mysqlSession) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.bound(ctx, conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set session bounds: %w", err)
	}
	return conn, nil
}

func (c *mysqlSession) bound(ctx context.Context, conn driver.Conn) error {
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		return errors.New("driver connection cannot execute statements")
	}
	run := func(stmts []string) error {
		for _, s := range stmts {
			if _, err := ex.ExecContext(ctx, s, nil); err != nil {
				return err
			}
		}
		return nil
	}
	f := c.flavor.Load()
	if f != 0 {
		return run(c.statements(f))
	}
	err := run(c.statements(flavorMariaDB))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1193 { // ER_UNKNOWN_SYSTEM_VARIABLE: not MariaDB
		c.flavor.Store(flavorMySQL)
		return run(c.statements(flavorMySQL))
	}
	if err == nil {
		c.flavor.Store(flavorMariaDB)
	}
	return err
}

// unboundMySQL lifts the statement bound for a migration (the variable
// that the server does not have fails, harmlessly).
var unboundMySQL = []string{`SET SESSION max_statement_time = 0`, `SET SESSION max_execution_time = 0`}
