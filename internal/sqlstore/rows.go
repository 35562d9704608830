package sqlstore

import (
	"database/sql"
	"strings"
	"unicode/utf8"

	"github.com/seckill-dev/seckill"
)

// scanOrder reads the columns of orderColumns.
func scanOrder(row interface{ Scan(...any) error }) (*seckill.Order, error) {
	var s orderScan
	if err := row.Scan(s.targets()...); err != nil {
		return nil, err
	}
	return s.order(), nil
}

// orderScan holds one row of orderColumns as Scan reads it.
type orderScan struct {
	o                                  seckill.Order
	status                             string
	payBy, reservedAt, created, update int64
	reason                             sql.NullString
}

// targets are the Scan targets of orderColumns.
func (s *orderScan) targets() []any {
	return []any{&s.o.ID, &s.o.ReservationID, &s.o.SaleID, &s.o.UserID, &s.o.Qty, &s.o.AmountCents, &s.status,
		&s.payBy, &s.reservedAt, &s.created, &s.update, &s.reason}
}

// order is the scanned order.
func (s *orderScan) order() *seckill.Order {
	o := s.o
	o.Status = seckill.OrderStatus(s.status)
	o.PayBy, o.ReservedAt = fromMillis(s.payBy), fromMillis(s.reservedAt)
	o.CreatedAt, o.UpdatedAt = fromMillis(s.created), fromMillis(s.update)
	o.CancelReason = s.reason.String
	return &o
}

// scanFailedOrder reads the columns of failedOrderSelect.
func scanFailedOrder(row interface{ Scan(...any) error }) (*seckill.FailedOrder, error) {
	var (
		f                        seckill.FailedOrder
		attempts, created        int64
		payload                  []byte
		resolvedAt               sql.NullInt64
		resolution, note, solver sql.NullString
	)
	err := row.Scan(&f.ReservationID, &f.SaleID, &f.UserID, &f.Qty, &f.Reason, &attempts, &payload, &created,
		&resolvedAt, &resolution, &note, &solver)
	if err != nil {
		return nil, err
	}
	if resolvedAt.Valid {
		f.Resolution = &seckill.Resolution{
			Action: seckill.FailedOrderAction(resolution.String), Note: note.String,
			Actor: solver.String, ResolvedAt: fromMillis(resolvedAt.Int64),
		}
		if f.Resolution.Action == seckill.ResolveRedrive {
			f.Resolution.OrderID = seckill.OrderIDOf(f.ReservationID)
		}
	}
	f.Attempts = int(attempts)
	if len(payload) > 0 {
		f.Payload = payload
	}
	f.CreatedAt = fromMillis(created)
	return &f, nil
}

// validReservationID reports whether id can name an order. Other ids
// cannot exist, and must not reach a dialect that would reject them
// differently (MySQL's ASCII column).
func validReservationID(id string) bool {
	_, ok := seckill.SaleIDOfReservation(id)
	return ok
}

// validFailedKey reports whether id can key a failed order: 1 to 255 bytes
// of valid UTF-8 without NUL, which every dialect stores unchanged.
func validFailedKey(id string) bool {
	return id != "" && len(id) <= maxFailedTextBytes && utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// storableText returns s as every dialect can store it: valid UTF-8
// (invalid bytes become U+FFFD), no NUL (PostgreSQL refuses it in text),
// and at most maxBytes bytes, cut at a character boundary.
func storableText(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > maxBytes {
		i := maxBytes
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}

// scanRestoreRequest reads the columns of restoreColumns.
func scanRestoreRequest(row interface{ Scan(...any) error }) (*seckill.RestoreRequest, error) {
	var (
		r                seckill.RestoreRequest
		state            string
		attempts         int64
		alerted          sql.NullInt64
		created, updated int64
	)
	err := row.Scan(&r.ReservationID, &r.SaleID, &r.Reason, &state, &attempts, &r.LastError, &alerted, &created, &updated)
	if err != nil {
		return nil, err
	}
	r.State, r.Attempts = seckill.RestoreState(state), int(attempts)
	if alerted.Valid {
		r.AlertedAt = fromMillis(alerted.Int64)
	}
	r.CreatedAt, r.UpdatedAt = fromMillis(created), fromMillis(updated)
	return &r, nil
}
