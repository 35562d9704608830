package seckill

import (
	"context"
	"time"
)

// ReservationEvent is the body of every broker message: one granted
// reservation on its way from the outbox (relay) to the database (order writer).
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

// Message is one unit of work on the broker. ID is the reservation id, also
// the broker's deduplication id where it has one; delivery is at least once.
type Message struct {
	ID   string
	Body []byte
}

// Delivery is one received message in a batch. The handler's last Ack or
// Retry wins; an unsettled one is a Retry, or a crash if ctx was cancelled.
type Delivery interface {
	Message() Message
	Attempt() int // 1-based, counting deliveries lost to crashes
	Ack()
	// Retry brings the message back after the back-off, or dead-letters it
	// with reason once it failed MaxAttempts times.
	Retry(reason error)
}

// Releaser is a Delivery given back without spending an attempt: the
// consumer could not work (its database is out of reach).
type Releaser interface {
	Release()
}

// DeadLetter is a message that failed its retry policy's MaxAttempts; the
// order writer records it in failed_orders.
type DeadLetter struct {
	Message  Message
	Attempts int
	Reason   string // the last attempt's error
}

// ConsumeOptions shape the batches a consumer's handler receives.
type ConsumeOptions struct {
	BatchSize int // default 100
	// Linger is how long a batch waits to fill after its first message;
	// default 0, as one broker message holds a whole relay batch.
	Linger time.Duration
	// OnForeign hears of each message of another deployment's namespace
	// that the consumer put back for its owner.
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

// Broker carries reservation events from the relay to the order writer:
// internal/rabbitmq, internal/nats and internal/handoff, each passing
// internal/conformance.
type Broker interface {
	// Publish returns nil once the broker confirmed every message; on error
	// some may be stored, so publish them all again.
	Publish(ctx context.Context, msgs []Message) error
	// Consume hands batches to handle until ctx ends (nil) or the broker is
	// closed (ErrClosed); a lost connection is waited out. Consumers compete.
	Consume(ctx context.Context, opts ConsumeOptions, handle func(ctx context.Context, batch []Delivery)) error
	// ConsumeDeadLetters is Consume for dead letters: a nil return removes
	// the batch, an error brings it back after a back-off.
	ConsumeDeadLetters(ctx context.Context, opts ConsumeOptions, handle func(ctx context.Context, batch []DeadLetter) error) error
	Close() error // safe to call twice
}
