package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

var mysqlDialect = &dialect{
	name: "mysql",
	sql:  mysqlSQL,
	isUniqueViolation: func(err error) bool {
		var e *mysql.MySQLError
		// 1062 ER_DUP_ENTRY; 1586 ER_DUP_ENTRY_WITH_KEY_NAME.
		return errors.As(err, &e) && (e.Number == 1062 || e.Number == 1586)
	},
	isUnavailable: func(err error) bool {
		var e *mysql.MySQLError
		// The driver's broken-connection error; 1040 too many connections,
		// 1053 server shutdown in progress, 1205 lock wait timeout; the
		// statement bound: 1969 MariaDB max_statement_time, 3024 MySQL
		// max_execution_time; 4031 MySQL ended the silent session.
		return errors.Is(err, mysql.ErrInvalidConn) ||
			errors.As(err, &e) && (e.Number == 1040 || e.Number == 1053 || e.Number == 1205 ||
				e.Number == 1969 || e.Number == 3024 || e.Number == 4031)
	},
	isTransient: func(err error) bool {
		var e *mysql.MySQLError
		// 1213 ER_LOCK_DEADLOCK: InnoDB rolled the transaction back. 1205
		// ER_LOCK_WAIT_TIMEOUT (innodb_lock_wait_timeout): the row's holder
		// may be a node cut off inside its transaction; the attempt is
		// rolled back and tried again from its reads.
		return errors.As(err, &e) && (e.Number == 1213 || e.Number == 1205)
	},
	lockMigrations:      lockMySQLMigrations,
	unbound:             unboundMySQL,
	oneStatementPerExec: true, // multiStatements stays off
}

// lockMySQLMigrations waits for the database's migration lock in short
// server-side waits, so that a cancelled ctx is noticed between them.
func lockMySQLMigrations(ctx context.Context, conn *sql.Conn) (func() error, error) {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, mysqlSQL.migrations.lock).Scan(&got); err != nil {
			return nil, err
		}
		if !got.Valid {
			return nil, errors.New("get_lock failed (is a database selected in the url?)")
		}
		if got.Int64 == 1 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, mysqlSQL.migrations.unlock)
		return err
	}, nil
}

// mysqlConfig translates mysql://user:pass@host:port/db?k=v into the
// driver's configuration. Parameters are the driver's own (tls, timeout, …)
// or session variables, as in its DSN.
func mysqlConfig(rawURL string) (*mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("malformed url") // url.Parse's error would echo the password
	}
	if u.Host == "" {
		return nil, errors.New("url has no host (want mysql://user:pass@host:port/db)")
	}
	if u.Opaque != "" {
		return nil, errors.New("malformed url (want mysql://user:pass@host:port/db)")
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" || strings.Contains(dbName, "/") {
		return nil, errors.New("url names no database (want mysql://user:pass@host:port/db)")
	}

	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	// The driver parses its own parameters, with the address so that
	// tls=true verifies the right server name; user and database come from
	// the URL, where they are unambiguous.
	cfg, err := mysql.ParseDSN("tcp(" + addr + ")/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("bad url parameters: %w", err)
	}
	cfg.DBName = dbName
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["sql_mode"]; !ok {
		// Strict: a value that does not fit is an error, never silently
		// clipped (a clipped stock count would be an oversell).
		cfg.Params["sql_mode"] = "'TRADITIONAL'"
	}
	return cfg, nil
}

// mysqlPool opens an unsized pool on a MySQL URL, with bounds b on every
// session unless b is nil.
func mysqlPool(rawURL string, b *Bounds) (*sql.DB, error) {
	cfg, err := mysqlConfig(rawURL)
	if err != nil {
		return nil, err
	}
	if b != nil {
		boundMySQL(cfg, *b)
	}
	// The driver logs broken connections to stderr through a global logger;
	// every such failure also comes back as an error to the caller, who
	// decides what to log, so the driver's lines are only noise.
	cfg.Logger = quietDriver{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	if b != nil {
		connector = &mysqlSession{Connector: connector, bounds: *b, skip: cfg.Params}
	}
	return sql.OpenDB(connector), nil
}

type quietDriver struct{}

func (quietDriver) Print(...any) {}
