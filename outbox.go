package seckill

// OutboxEntry is one reservation of a sale's outbox, recorded by the
// reserve script in the same step as its stock deduction, waiting for the
// relay to publish it to the broker. An outbox entry holds the
// reservations of one script call: they share its StreamID, and Seq
// numbers them in it.
type OutboxEntry struct {
	// StreamID is the position of the reservation's entry in the outbox,
	// what an ack takes.
	StreamID string
	// Seq is the reservation's place in its entry, from 0.
	Seq int
	// Event is the reservation the entry records. When Err is set it holds
	// only what could be decoded (at least SaleID).
	Event ReservationEvent
	// Fields are the raw field values of a reservation that could not be
	// decoded (for one of a batch, its line's values under the names of an
	// entry of one reservation, as far as they could be told apart), or of
	// a whole entry that could not; nil for a good reservation, and for an
	// entry deleted from the outbox while still pending.
	Fields map[string]string
	// Err is set when the entry could not be decoded into Event (a field
	// is missing or malformed, or the entry is gone). Such an entry is
	// returned all the same, never dropped: the relay must still move it
	// on (publish it raw, for the order writer to dead-letter to
	// failed_orders) and alert, or it would sit in the outbox forever.
	Err error
}
