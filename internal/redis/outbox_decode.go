package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// The outbox's entry format, as reserve.lua writes it, decoded for the
// relay.

// Outbox stream field names (reserve.lua). An entry is a batch: n
// reservations, reserved at at (ms), in b, one line each. Entries written
// before held one reservation in the four fields after them, which stand
// for a batch's line where one must be shown raw (a malformed line).
const (
	OutboxCount         = "n"
	OutboxAtMs          = "at"
	OutboxBatch         = "b"
	OutboxKeys          = "k" // the batch's idempotency keys, a line each; absent when none
	OutboxReservationID = "reservation_id"
	OutboxUserID        = "user_id"
	OutboxQty           = "qty"
	OutboxReservedAtMs  = "reserved_at_ms"
)

// decodeOutbox decodes the entries of one outbox into their reservations,
// in order; a bucket's events are its sale's.
func decodeOutbox(saleID string, entries []rueidis.XRangeEntry) []seckill.OutboxEntry {
	if base, ok := bucketBase(saleID); ok {
		saleID = base
	}
	out := make([]seckill.OutboxEntry, 0, len(entries))
	for _, e := range entries {
		if _, ok := e.FieldValues[OutboxBatch]; ok {
			out = decodeBatch(out, saleID, e)
			continue
		}
		o := seckill.OutboxEntry{StreamID: e.ID}
		o.Event, o.Err = decodeOutboxEvent(saleID, e.FieldValues)
		if o.Err != nil {
			o.Fields = e.FieldValues
			o.Err = fmt.Errorf("%w: sale %s, stream id %s: %w", ErrMalformedOutboxEntry, saleID, e.ID, o.Err)
		}
		out = append(out, o)
	}
	return out
}

// decodeBatch appends the reservations of an entry of reserve.lua's batch
// format to out. A line that cannot be decoded is a reservation with Err
// and its values as Fields; an entry whose count or time cannot be read,
// or whose count is not its number of lines, is one, with the entry's
// fields.
func decodeBatch(out []seckill.OutboxEntry, saleID string, e rueidis.XRangeEntry) []seckill.OutboxEntry {
	f := e.FieldValues
	malformed := func(seq int, fields map[string]string, err error) seckill.OutboxEntry {
		return seckill.OutboxEntry{StreamID: e.ID, Seq: seq, Event: seckill.ReservationEvent{SaleID: saleID}, Fields: fields,
			Err: fmt.Errorf("%w: sale %s, stream id %s: %w", ErrMalformedOutboxEntry, saleID, e.ID, err)}
	}
	n, err := strconv.Atoi(f[OutboxCount])
	if err != nil || n < 1 || n != strings.Count(f[OutboxBatch], "\n")+1 {
		return append(out, malformed(0, f, fmt.Errorf("%s %q does not count the lines of %s", OutboxCount, f[OutboxCount], OutboxBatch)))
	}
	ms, err := strconv.ParseInt(f[OutboxAtMs], 10, 64)
	if err != nil || ms <= 0 {
		return append(out, malformed(0, f, fmt.Errorf("invalid %s %q", OutboxAtMs, f[OutboxAtMs])))
	}
	at := time.UnixMilli(ms).UTC()
	rest := f[OutboxBatch]
	keys, keyed := f[OutboxKeys]
	if keyed && strings.Count(keys, "\n")+1 != n {
		// The keys are only a convenience for a retry: a batch whose
		// keys do not line up is persisted without them.
		keyed = false
	}
	for seq := range n {
		var line, key string
		line, rest, _ = strings.Cut(rest, "\n")
		if keyed {
			key, keys, _ = strings.Cut(keys, "\n")
		}
		qty, tail, _ := strings.Cut(line, " ")
		short, user, _ := strings.Cut(tail, " ")
		ev := seckill.ReservationEvent{ReservationID: saleID + "." + short, SaleID: saleID, UserID: user, ReservedAt: at}
		if seckill.ValidIdempotencyKey(key) {
			ev.KeyDigest = seckill.IdempotencyDigest(key)
		}
		q, qerr := strconv.ParseInt(qty, 10, 64)
		ev.Qty = q
		switch {
		case !isReservationOf(ev.ReservationID, saleID):
			err = fmt.Errorf("line %d: %q is not a reservation id", seq+1, short)
		case !seckill.ValidUserID(user):
			err = fmt.Errorf("line %d: invalid %s %q", seq+1, OutboxUserID, user)
		case qerr != nil || q < 1:
			err = fmt.Errorf("line %d: invalid %s %q", seq+1, OutboxQty, qty)
		default:
			out = append(out, seckill.OutboxEntry{StreamID: e.ID, Seq: seq, Event: ev})
			continue
		}
		bad := malformed(seq, map[string]string{OutboxReservationID: ev.ReservationID, OutboxUserID: user, OutboxQty: qty,
			OutboxReservedAtMs: f[OutboxAtMs]}, err)
		out = append(out, bad)
	}
	return out
}

// isReservationOf reports whether id is a well-formed reservation id of
// saleID.
func isReservationOf(id, saleID string) bool {
	sale, ok := seckill.SaleIDOfReservation(id)
	return ok && sale == saleID
}

// decodeOutboxEvent decodes the fields of an entry of one reservation,
// as reserve.lua wrote them before batches. It returns what it could
// decode along with the first problem found.
func decodeOutboxEvent(saleID string, f map[string]string) (seckill.ReservationEvent, error) {
	ev := seckill.ReservationEvent{SaleID: saleID}
	if f == nil {
		return ev, errors.New("entry deleted from the stream while pending")
	}
	ev.ReservationID = f[OutboxReservationID]
	ev.UserID = f[OutboxUserID]
	if !isReservationOf(ev.ReservationID, saleID) {
		return ev, fmt.Errorf("%s %q is not a reservation id of this sale", OutboxReservationID, ev.ReservationID)
	}
	if !seckill.ValidUserID(ev.UserID) {
		return ev, fmt.Errorf("invalid %s %q", OutboxUserID, ev.UserID)
	}
	qty, err := strconv.ParseInt(f[OutboxQty], 10, 64)
	if err != nil || qty < 1 {
		return ev, fmt.Errorf("invalid %s %q", OutboxQty, f[OutboxQty])
	}
	ev.Qty = qty
	ms, err := strconv.ParseInt(f[OutboxReservedAtMs], 10, 64)
	if err != nil || ms <= 0 {
		return ev, fmt.Errorf("invalid %s %q", OutboxReservedAtMs, f[OutboxReservedAtMs])
	}
	ev.ReservedAt = time.UnixMilli(ms).UTC()
	return ev, nil
}
