package seckill

import (
	"context"
	"fmt"
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
	// KeyDigest is IdempotencyDigest of the Idempotency-Key the
	// reservation was made under, "" without one: the order keeps it, so a
	// retry whose key Redis forgot is still answered with this reservation.
	KeyDigest string `json:"key_digest,omitempty"`
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

// Releaser is a Delivery that can be given back without spending an
// attempt: the consumer could not work on it (its database is out of
// reach), which says nothing about the message. It comes back after the
// retry policy's first back-off, for any consumer, with the same attempt
// count. Every adapter's deliveries are Releasers (they embed
// brokerpack.Settlement).
type Releaser interface {
	Release()
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
