package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/seckill-dev/seckill"
)

// ErrUnavailable is what callers see when the database cannot be reached or
// did not answer in time: a temporary condition the API answers with 503
// and Retry-After, and the order writer waits out without spending an
// attempt. It is a *seckill.Error with code EUNAVAILABLE, so it crosses
// packages without them importing this one.
var ErrUnavailable = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "The database is unavailable; retry later."}

// classify marks the errors that mean "the database is not answering" with
// ErrUnavailable, keeping the driver's error in the chain for the logs.
// Everything else (a constraint, a bad row, a bug) is returned as is. A
// cancelled context is the caller's own doing, not an outage: it stays as
// it is. Safe to apply twice.
func (db *DB) classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !db.isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (db *DB) isUnavailable(err error) bool {
	var nerr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &nerr):
		return true
	}
	return db.dialect.isUnavailable != nil && db.dialect.isUnavailable(err)
}
