package brokerpack

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// EventMessage encodes e as a JSON broker message whose ID is the
// reservation id: what external brokers carry.
func EventMessage(e seckill.ReservationEvent) (seckill.Message, error) {
	if body, ok := appendEventJSON(make([]byte, 0, eventJSONLen(e)), e); ok {
		return seckill.Message{ID: e.ReservationID, Body: body}, nil
	}
	body, err := json.Marshal(e)
	if err != nil {
		return seckill.Message{}, fmt.Errorf("encode reservation event: %w", err)
	}
	return seckill.Message{ID: e.ReservationID, Body: body}, nil
}

// Compact events: the same fields as the JSON, laid out as
//
//	"SKE1" id-length id sale-length sale user-length user qty reserved-at
//	[digest-length digest]
//
// lengths and qty unsigned varints, reserved-at a signed varint of unix
// milliseconds (the outbox's precision). The key digest is written only
// when there is one; an event of before has none. A fifth of the bytes and no
// reflection either way. DecodeReservationEvent reads both layouts, so a
// relay may switch once every writer reading its broker is of this
// version; the embedded broker's relay does (its writer is this process).
const eventMagic = "SKE1"

// CompactEvent encodes e as a broker message in the compact layout.
func CompactEvent(e seckill.ReservationEvent) seckill.Message {
	b := make([]byte, 0, len(eventMagic)+len(e.ReservationID)+len(e.SaleID)+len(e.UserID)+len(e.KeyDigest)+6*binary.MaxVarintLen64)
	b = append(b, eventMagic...)
	for _, s := range []string{e.ReservationID, e.SaleID, e.UserID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(max(e.Qty, 0)))
	b = binary.AppendVarint(b, e.ReservedAt.UnixMilli())
	if e.KeyDigest != "" {
		b = binary.AppendUvarint(b, uint64(len(e.KeyDigest)))
		b = append(b, e.KeyDigest...)
	}
	return seckill.Message{ID: e.ReservationID, Body: b}
}

// ErrBadEvent is returned by DecodeReservationEvent for a body that is
// neither layout.
var ErrBadEvent = errors.New("malformed reservation event")

// DecodeReservationEvent reads an event body, compact or JSON. It checks
// the layout only; what the fields hold is the reader's to judge.
func DecodeReservationEvent(body []byte) (seckill.ReservationEvent, error) {
	var e seckill.ReservationEvent
	if !bytes.HasPrefix(body, []byte(eventMagic)) {
		if fast, ok := decodeEventJSON(body); ok {
			return fast, nil
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return e, fmt.Errorf("%w: %w", ErrBadEvent, err)
		}
		return e, nil
	}
	r := body[len(eventMagic):]
	for _, dst := range []*string{&e.ReservationID, &e.SaleID, &e.UserID} {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) {
			return seckill.ReservationEvent{}, fmt.Errorf("%w: truncated", ErrBadEvent)
		}
		*dst = string(r[k : k+int(n)])
		r = r[k+int(n):]
	}
	qty, k := binary.Uvarint(r)
	if k <= 0 || qty > 1<<62 {
		return seckill.ReservationEvent{}, fmt.Errorf("%w: qty", ErrBadEvent)
	}
	r = r[k:]
	ms, k := binary.Varint(r)
	if k <= 0 {
		return seckill.ReservationEvent{}, fmt.Errorf("%w: reserved-at", ErrBadEvent)
	}
	e.Qty, e.ReservedAt = int64(qty), time.UnixMilli(ms).UTC()
	if r = r[k:]; len(r) == 0 {
		return e, nil
	}
	n, k := binary.Uvarint(r)
	if k <= 0 || n == 0 || n != uint64(len(r)-k) {
		return seckill.ReservationEvent{}, fmt.Errorf("%w: key digest", ErrBadEvent)
	}
	e.KeyDigest = string(r[k:])
	return e, nil
}

// EventJSON returns body as JSON for a person to read: a compact event
// re-encoded, anything else unchanged.
func EventJSON(body []byte) []byte {
	if !bytes.HasPrefix(body, []byte(eventMagic)) {
		return body
	}
	e, err := DecodeReservationEvent(body)
	if err != nil {
		return body
	}
	m, err := EventMessage(e)
	if err != nil {
		return body
	}
	return m.Body
}
