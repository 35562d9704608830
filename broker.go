package seckill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ReservationEvent is the body of every broker message: one reservation the
// stock store granted, on its way from the outbox (relay) to the database
// (order writer).
type ReservationEvent struct {
	ReservationID string    `json:"reservation_id"`
	SaleID        string    `json:"sale_id"`
	UserID        string    `json:"user_id"`
	Qty           int64     `json:"qty"`
	ReservedAt    time.Time `json:"reserved_at"`
}

// Message encodes e as a broker message whose ID is the reservation id.
func (e ReservationEvent) Message() (Message, error) {
	if body, ok := appendEventJSON(make([]byte, 0, eventJSONLen(e)), e); ok {
		return Message{ID: e.ReservationID, Body: body}, nil
	}
	body, err := json.Marshal(e)
	if err != nil {
		return Message{}, fmt.Errorf("encode reservation event: %w", err)
	}
	return Message{ID: e.ReservationID, Body: body}, nil
}

// Compact events: the same fields as the JSON, laid out as
//
//	"SKE1" id-length id sale-length sale user-length user qty reserved-at
//
// lengths and qty unsigned varints, reserved-at a signed varint of unix
// milliseconds (the outbox's precision). A fifth of the bytes and no
// reflection either way. DecodeReservationEvent reads both layouts, so a
// relay may switch once every writer reading its broker is of this
// version; the embedded broker's relay does (its writer is this process).
const eventMagic = "SKE1"

// CompactMessage encodes e as a broker message in the compact layout.
func (e ReservationEvent) CompactMessage() Message {
	b := make([]byte, 0, len(eventMagic)+len(e.ReservationID)+len(e.SaleID)+len(e.UserID)+5*binary.MaxVarintLen64)
	b = append(b, eventMagic...)
	for _, s := range []string{e.ReservationID, e.SaleID, e.UserID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(max(e.Qty, 0)))
	b = binary.AppendVarint(b, e.ReservedAt.UnixMilli())
	return Message{ID: e.ReservationID, Body: b}
}

// ErrBadEvent is returned by DecodeReservationEvent for a body that is
// neither layout.
var ErrBadEvent = errors.New("malformed reservation event")

// DecodeReservationEvent reads an event body, compact or JSON. It checks
// the layout only; what the fields hold is the reader's to judge.
func DecodeReservationEvent(body []byte) (ReservationEvent, error) {
	var e ReservationEvent
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
			return ReservationEvent{}, fmt.Errorf("%w: truncated", ErrBadEvent)
		}
		*dst = string(r[k : k+int(n)])
		r = r[k+int(n):]
	}
	qty, k := binary.Uvarint(r)
	if k <= 0 || qty > 1<<62 {
		return ReservationEvent{}, fmt.Errorf("%w: qty", ErrBadEvent)
	}
	r = r[k:]
	ms, k := binary.Varint(r)
	if k <= 0 || k != len(r) {
		return ReservationEvent{}, fmt.Errorf("%w: reserved-at", ErrBadEvent)
	}
	e.Qty, e.ReservedAt = int64(qty), time.UnixMilli(ms).UTC()
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
	m, err := e.Message()
	if err != nil {
		return body
	}
	return m.Body
}

// Message is one unit of work on the broker. ID is the reservation id; the
// adapters also hand it to the broker as its deduplication id where the broker
// has one (JetStream Nats-Msg-Id, AMQP message-id). Delivery is at least once:
// consumers must tolerate seeing the same ID again.
type Message struct {
	ID   string
	Body []byte
}

// Delivery is one received message, handed to a consumer's handler inside a
// batch. The handler settles each delivery with Ack or Retry; the last call
// made before the handler returns wins, and the adapter applies the decisions
// of the whole batch together when the handler returns. A delivery left
// unsettled counts as a Retry if the consume context is still live, and as a
// crash (abandoned, redelivered by the broker) if it was cancelled.
type Delivery interface {
	Message() Message
	// Attempt is the 1-based count of deliveries of this message, including
	// deliveries lost to consumer crashes.
	Attempt() int
	// Ack marks the message done: it is removed from the broker.
	Ack()
	// Retry marks the attempt failed: the message comes back after the
	// policy's back-off, or, once it has failed MaxAttempts times, goes to
	// the dead-letter side carrying reason.
	Retry(reason error)
}

// DeadLetter is a message that failed RetryPolicy.MaxAttempts times. The
// order writer records it in failed_orders for an operator.
type DeadLetter struct {
	Message Message
	// Attempts is how many deliveries the message had before it gave up.
	Attempts int
	// Reason is the error of the last failed attempt, as text.
	Reason string
}

// ConsumeOptions shape the batches a consumer's handler receives.
type ConsumeOptions struct {
	// BatchSize is the most deliveries handed to one handler call.
	// Default 100.
	BatchSize int
	// Linger is how long a batch waits to fill once its first message has
	// arrived. Default 0: a batch is what has arrived by the time its
	// first message did (a broker message holds a whole relay batch).
	Linger time.Duration
	// OnForeign, if set, is told of every broker message of another
	// deployment's namespace that the consumer left alone (put back for its
	// owner), with the count of events in it.
	OnForeign func(namespace string, events int)
}

// WithDefaults returns o with zero fields set to their defaults.
func (o ConsumeOptions) WithDefaults() ConsumeOptions {
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	o.Linger = max(o.Linger, 0)
	return o
}

// RetryPolicy is how a broker adapter treats a failing message: attempt n
// (1-based) that fails is retried after Delay(n), and the message is
// dead-lettered once it has failed MaxAttempts times.
type RetryPolicy struct {
	MaxAttempts int
	// Backoff is the wait after the first failure; it doubles each time,
	// up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is 5 attempts with back-off 100ms, 200ms, 400ms, 800ms.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 5, Backoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

// Validate reports a policy that cannot work.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("retry policy: MaxAttempts must be at least 1, got %d", p.MaxAttempts)
	case p.Backoff < time.Millisecond:
		return fmt.Errorf("retry policy: Backoff must be at least 1ms, got %s", p.Backoff)
	case p.MaxBackoff < p.Backoff:
		return fmt.Errorf("retry policy: MaxBackoff %s is below Backoff %s", p.MaxBackoff, p.Backoff)
	}
	return nil
}

// Delay is the wait before attempt+1 after attempt (1-based) failed.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Broker carries reservation events from the relay to the order writer:
// RabbitMQ (internal/rabbitmq) or NATS JetStream (internal/nats). Both pass
// the suite in internal/conformance.
type Broker interface {
	// Publish stores msgs durably. It returns nil only when the broker has
	// confirmed every message; confirms are awaited once for the whole
	// slice, not per message. On error some messages may have been stored:
	// publish them all again (delivery is at least once).
	Publish(ctx context.Context, msgs []Message) error
	// Consume hands batches of deliveries to handle, one batch at a time,
	// until ctx is cancelled (it then returns nil, after the batch in hand
	// is settled) or the broker is closed (ErrClosed). A lost connection is
	// waited out, not returned. Several Consume calls, in one process or
	// many, share the messages as competing consumers.
	Consume(ctx context.Context, opts ConsumeOptions, handle func(ctx context.Context, batch []Delivery)) error
	// ConsumeDeadLetters hands batches of dead letters to handle, with the
	// same lifetime as Consume. A nil return removes the batch; an error
	// brings it back after a back-off.
	ConsumeDeadLetters(ctx context.Context, opts ConsumeOptions, handle func(ctx context.Context, batch []DeadLetter) error) error
	// Close releases the connection. Safe to call twice.
	Close() error
}

// Settlement is a handler's decision on one delivery, with the rule of the
// Delivery contract built in: the last Ack or Retry before Freeze wins, and
// calls after Freeze (the handler has returned) are ignored. Broker
// adapters embed it in their Delivery and apply what Freeze returns.
type Settlement struct {
	mu     sync.Mutex
	state  SettleState
	reason string
	frozen bool
}

// SettleState is what became of a delivery.
type SettleState uint8

const (
	Unsettled SettleState = iota // no decision: a crash if the consumer is stopping, else a retry
	Acked
	Retried
	Released // given back for another consumer, no attempt spent
)

// Releaser is a Delivery that can be given back without spending an
// attempt: the consumer could not work on it (its database is out of
// reach), which says nothing about the message. It comes back at once,
// for any consumer, with the same attempt count. Every adapter's
// deliveries are Releasers (they embed Settlement).
type Releaser interface {
	Release()
}

// Release gives the delivery back, as Releaser says.
func (s *Settlement) Release() { s.set(Released, "") }

// Ack marks the delivery done.
func (s *Settlement) Ack() { s.set(Acked, "") }

// Retry marks the attempt failed, keeping reason for the dead letter.
func (s *Settlement) Retry(reason error) {
	text := "retry requested without a reason"
	if reason != nil {
		text = reason.Error()
	}
	s.set(Retried, text)
}

// Decide records a decision the adapter takes itself (a message that has
// already had all its attempts), as Retry would.
func (s *Settlement) Decide(state SettleState, reason string) { s.set(state, reason) }

func (s *Settlement) set(state SettleState, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.frozen {
		s.state, s.reason = state, reason
	}
}

// Freeze ends the handler's say and returns its decision.
func (s *Settlement) Freeze() (SettleState, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = true
	return s.state, s.reason
}

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
	Message
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
func Packed(msgs []Message, attempt int) []PackedMessage {
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
		return Pack{Events: []PackedMessage{{Message: Message{ID: id, Body: body}, Attempt: 1}}}, nil
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
		p.Events[i] = PackedMessage{Message: Message{ID: string(eid), Body: ebody}, Attempt: int(attempt)}
	}
	if len(r) != 0 {
		return Pack{}, fmt.Errorf("%w: %d bytes after the last event", ErrBadPack, len(r))
	}
	return p, nil
}

// PackDelivery is a Delivery of one event of a pack, as both adapters hand
// it out.
type PackDelivery struct {
	Settlement
	Msg Message
	N   int // attempt
}

// Message implements Delivery.
func (d *PackDelivery) Message() Message { return d.Msg }

// Attempt implements Delivery.
func (d *PackDelivery) Attempt() int { return d.N }

// Verdict is what becomes of one broker message (a pack) once the handler
// has had its events: abandon it to the broker's redelivery, or store the
// copies (retries grouped by back-off, dead letters one per event) and then
// ack it.
type Verdict struct {
	Abandon bool
	Retry   map[time.Duration][]PackedMessage
	Dead    []DeadLetter
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
			v.Dead = append(v.Dead, DeadLetter{Message: d.Msg, Attempts: d.N, Reason: reason})
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
func Unpack(id string, body []byte, crashes int, policy RetryPolicy) (p Pack, all []*PackDelivery, handOut []Delivery) {
	p, err := DecodePack(id, body)
	if err != nil {
		p = Pack{Events: []PackedMessage{{Message: Message{ID: id, Body: body}, Attempt: 1}}}
	}
	all = make([]*PackDelivery, len(p.Events))
	handOut = make([]Delivery, 0, len(p.Events))
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
func HandOut(ctx context.Context, ds []Delivery, size int, handle func(context.Context, []Delivery)) {
	for len(ds) > 0 && ctx.Err() == nil {
		n := min(len(ds), max(size, 1))
		handle(ctx, ds[:n:n])
		ds = ds[n:]
	}
}
