package seckill

// OutboxEntry is one entry of a sale's outbox: a reservation recorded by the
// reserve script in the same step as its stock deduction, waiting for the
// relay to publish it to the broker.
type OutboxEntry struct {
	// StreamID is the entry's position in the outbox, what an ack takes.
	StreamID string
	// Event is the reservation the entry records. When Err is set it holds
	// only what could be decoded (at least SaleID).
	Event ReservationEvent
	// Fields are the entry's raw field values, nil when the entry has been
	// deleted from the outbox while still pending.
	Fields map[string]string
	// Err is set when the entry could not be decoded into Event (a field
	// is missing or malformed, or the entry is gone). Such an entry is
	// returned all the same, never dropped: the relay must still move it
	// on (publish it raw, for the order writer to dead-letter to
	// failed_orders) and alert, or it would sit in the outbox forever.
	Err error
}
