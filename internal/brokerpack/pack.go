// Package brokerpack is the broker adapters' shared wire format and
// settlement rules: the reservation event's two codecs (JSON for external
// brokers, compact on the embedded one), the pack that carries one relay
// batch as one broker message, the Settlement a handler's Ack/Retry
// lands in, and the verdict on a pack once its events are settled.
// internal/nats, internal/rabbitmq and internal/handoff use it alike.
package brokerpack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// Packs: one broker message per relay batch.
//
// The relay hands Publish a batch of reservation events; the adapters carry
// it as ONE broker message, a pack, and the consumer side unpacks it into
// one Delivery per event, so the order writer, deduplication and dead
// letters still work event by event. A broker then stores, confirms, acks
// and deletes once per batch instead of once per reservation. The layout,
// all integers unsigned varints:
//
//	"SKP1" namespace-length namespace count
//	count × ( attempt id-length id body-length body )
//
// attempt is the attempt number the event's next delivery counts as (1
// for a fresh publish, n+1 for a retry copy after attempt n); deliveries of
// the pack lost to consumer crashes add to it. A body that does not start
// with the magic is one event of the reader's own namespace (what a
// version before packs published).
const packMagic = "SKP1"

// Pack limits: a pack stays well inside NATS's default 1 MB payload.
const (
	MaxPackEvents = 1000
	MaxPackBytes  = 512 << 10
)

// PackedMessage is one event in a pack: the message and the attempt its
// next delivery counts as.
type PackedMessage struct {
	seckill.Message
	Attempt int
	// Release, when not 0, tells a released copy (Settlement.Release)
	// from the message it copies, which has the same attempt: PackID
	// counts it, so a broker's duplicate window does not drop the copy.
	// It is not carried in the pack's body.
	Release int64
}

// Pack is a decoded pack.
type Pack struct {
	// Namespace is the deployment that published it; "" for a message
	// from before packs (read as the reader's own).
	Namespace string
	Events    []PackedMessage
}

// Packed returns msgs as events of a pack whose next delivery counts as
// attempt.
func Packed(msgs []seckill.Message, attempt int) []PackedMessage {
	out := make([]PackedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = PackedMessage{Message: m, Attempt: attempt}
	}
	return out
}

// SplitPacks cuts msgs into runs that each fit one pack.
func SplitPacks(msgs []PackedMessage) [][]PackedMessage {
	var out [][]PackedMessage
	start, size := 0, 0
	for i, m := range msgs {
		n := len(m.ID) + len(m.Body) + 3*binary.MaxVarintLen32
		if i > start && (i-start >= MaxPackEvents || size+n > MaxPackBytes) {
			out = append(out, msgs[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(msgs) {
		out = append(out, msgs[start:])
	}
	return out
}

// EncodePack lays msgs out as one pack of namespace.
func EncodePack(namespace string, msgs []PackedMessage) []byte {
	n := len(packMagic) + 2*binary.MaxVarintLen64 + len(namespace)
	for _, m := range msgs {
		n += 3*binary.MaxVarintLen64 + len(m.ID) + len(m.Body)
	}
	b := make([]byte, 0, n)
	b = append(b, packMagic...)
	b = binary.AppendUvarint(b, uint64(len(namespace)))
	b = append(b, namespace...)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendUvarint(b, uint64(max(m.Attempt, 1)))
		b = binary.AppendUvarint(b, uint64(len(m.ID)))
		b = append(b, m.ID...)
		b = binary.AppendUvarint(b, uint64(len(m.Body)))
		b = append(b, m.Body...)
	}
	return b
}

// PackID names a pack by its events and their attempts, so that publishing
// the same batch again yields the same id (a broker's duplicate window
// stores it once), and different batches never share one.
func PackID(msgs []PackedMessage) string {
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	for _, m := range msgs {
		h.Write(binary.AppendUvarint(buf[:0], uint64(len(m.ID))))
		h.Write([]byte(m.ID))
		h.Write(binary.AppendUvarint(buf[:0], uint64(max(m.Attempt, 1))))
		if m.Release != 0 {
			h.Write([]byte("release"))
			h.Write(binary.AppendVarint(buf[:0], m.Release))
		}
	}
	return "pack-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// IsPack reports whether body is laid out as a pack.
func IsPack(body []byte) bool { return bytes.HasPrefix(body, []byte(packMagic)) }

// PackLen is how many events a broker message holds, read cheaply from a
// pack's header (1 for anything else).
func PackLen(body []byte) int {
	if !IsPack(body) {
		return 1
	}
	r := body[len(packMagic):]
	nsLen, n := binary.Uvarint(r)
	if n <= 0 || nsLen > uint64(len(r)-n) {
		return 1
	}
	count, m := binary.Uvarint(r[n+int(nsLen):])
	if m <= 0 || count == 0 {
		return 1
	}
	return int(min(count, MaxPackEvents))
}

// ErrBadPack is returned by DecodePack for a body that starts as a pack but
// does not parse.
var ErrBadPack = errors.New("malformed pack")

// DecodePack reads a pack. The events' bodies alias body. A body that is
// not a pack is one event with id, attempt 1, namespace "".
func DecodePack(id string, body []byte) (Pack, error) {
	if !IsPack(body) {
		return Pack{Events: []PackedMessage{{Message: seckill.Message{ID: id, Body: body}, Attempt: 1}}}, nil
	}
	r := body[len(packMagic):]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		n, ok := next()
		if !ok || n > uint64(len(r)) {
			return nil, false
		}
		v := r[:n:n]
		r = r[n:]
		return v, true
	}
	ns, ok := bytesOf()
	if !ok {
		return Pack{}, fmt.Errorf("%w: namespace", ErrBadPack)
	}
	count, ok := next()
	if !ok || count > uint64(len(r)) {
		return Pack{}, fmt.Errorf("%w: event count", ErrBadPack)
	}
	p := Pack{Namespace: string(ns), Events: make([]PackedMessage, count)}
	for i := range p.Events {
		attempt, ok := next()
		if !ok || attempt < 1 || attempt > 1<<20 {
			return Pack{}, fmt.Errorf("%w: attempt of event %d", ErrBadPack, i+1)
		}
		eid, ok := bytesOf()
		if !ok {
			return Pack{}, fmt.Errorf("%w: id of event %d", ErrBadPack, i+1)
		}
		ebody, ok := bytesOf()
		if !ok {
			return Pack{}, fmt.Errorf("%w: body of event %d", ErrBadPack, i+1)
		}
		p.Events[i] = PackedMessage{Message: seckill.Message{ID: string(eid), Body: ebody}, Attempt: int(attempt)}
	}
	if len(r) != 0 {
		return Pack{}, fmt.Errorf("%w: %d bytes after the last event", ErrBadPack, len(r))
	}
	return p, nil
}

// PackDelivery is a seckill.Delivery of one event of a pack, as both adapters hand
// it out.
type PackDelivery struct {
	Settlement
	Msg seckill.Message
	N   int // attempt
}

// Message implements seckill.Delivery.
func (d *PackDelivery) Message() seckill.Message { return d.Msg }

// Attempt implements seckill.Delivery.
func (d *PackDelivery) Attempt() int { return d.N }

// Verdict is what becomes of one broker message (a pack) once the handler
// has had its events: abandon it to the broker's redelivery, or store the
// copies (retries grouped by back-off, dead letters one per event) and then
// ack it.
type Verdict struct {
	Abandon bool
	Retry   map[time.Duration][]PackedMessage
	Dead    []seckill.DeadLetter
}

// Judge freezes the deliveries of one pack and decides its verdict under
// policy. live is whether the consume context was still live when the
// handler returned: an unsettled delivery is then a retry, otherwise a
// crash, which abandons the whole pack (the events already acked come
// back as duplicates, which the order writer tolerates).
func Judge(ds []*PackDelivery, policy RetryPolicy, live bool) Verdict {
	var v Verdict
	for _, d := range ds {
		state, reason := d.Freeze()
		switch state {
		case Acked:
			continue
		case Released:
			// Back after the first back-off (a delay every adapter has a
			// way for), with the attempt it had.
			if v.Retry == nil {
				v.Retry = map[time.Duration][]PackedMessage{}
			}
			delay := policy.Delay(1)
			v.Retry[delay] = append(v.Retry[delay], PackedMessage{Message: d.Msg, Attempt: d.N, Release: time.Now().UnixNano()})
			continue
		case Unsettled:
			if !live {
				return Verdict{Abandon: true}
			}
			reason = "handler returned without settling the delivery"
		}
		if d.N >= policy.MaxAttempts {
			v.Dead = append(v.Dead, seckill.DeadLetter{Message: d.Msg, Attempts: d.N, Reason: reason})
			continue
		}
		if v.Retry == nil {
			v.Retry = map[time.Duration][]PackedMessage{}
		}
		delay := policy.Delay(d.N)
		v.Retry[delay] = append(v.Retry[delay], PackedMessage{Message: d.Msg, Attempt: d.N + 1})
	}
	return v
}

// Unpack turns one received broker message into deliveries: all of them,
// and those to hand to the handler. crashes is how many earlier deliveries
// of this broker message were lost without a decision; they count against
// every event's attempts. An event already past policy.MaxAttempts is
// decided (dead-lettered) without bothering the handler. A body that starts
// as a pack but does not parse is one delivery carrying the raw body: the
// handler cannot decode it, so it ends as a failed order an operator can
// read.
func Unpack(id string, body []byte, crashes int, policy RetryPolicy) (p Pack, all []*PackDelivery, handOut []seckill.Delivery) {
	p, err := DecodePack(id, body)
	if err != nil {
		p = Pack{Events: []PackedMessage{{Message: seckill.Message{ID: id, Body: body}, Attempt: 1}}}
	}
	all = make([]*PackDelivery, len(p.Events))
	handOut = make([]seckill.Delivery, 0, len(p.Events))
	for i, e := range p.Events {
		d := &PackDelivery{Msg: e.Message, N: e.Attempt + max(crashes, 0)}
		all[i] = d
		if d.N > policy.MaxAttempts {
			// Earlier deliveries were lost without a decision (a consumer
			// crashing on this message?): it has had its chances.
			d.Decide(Retried, fmt.Sprintf("delivered %d times without being settled", d.N-1))
			d.N--
			continue
		}
		handOut = append(handOut, d)
	}
	return p, all, handOut
}

// HandOut calls handle with ds in batches of at most size, one after
// another, until ctx ends.
func HandOut(ctx context.Context, ds []seckill.Delivery, size int, handle func(context.Context, []seckill.Delivery)) {
	for len(ds) > 0 && ctx.Err() == nil {
		n := min(len(ds), max(size, 1))
		handle(ctx, ds[:n:n])
		ds = ds[n:]
	}
}
