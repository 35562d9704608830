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
	// Fields are the raw values of what could not be decoded, so an
	// operator can read them; nil for a good reservation.
	// A bad line of a batch is given under the field names of a
	// one-reservation entry (internal/redis decodeBatch).
	Fields map[string]string
	// Err is set when the entry could not be decoded into Event. Such an
	// entry is returned, never dropped, so the relay moves it on to the
	// failed orders instead of leaving it in the outbox forever.
	Err error
}
