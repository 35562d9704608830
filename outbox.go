package seckill

// OutboxEntry is one reservation in a sale's outbox, written by the reserve
// script with its stock deduction. The reservations of one script call share
// a StreamID (what an ack takes); Seq numbers them from 0.
type OutboxEntry struct {
	StreamID string
	Seq      int
	// Event holds what could be decoded (at least SaleID) when Err is set.
	Event ReservationEvent
	// Fields are the raw values of an undecodable entry, for an operator.
	Fields map[string]string
	// Err marks an undecodable entry: returned, not dropped, so the relay
	// moves it to the failed orders.
	Err error
}
