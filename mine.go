package seckill

// A buyer whose answer to a reservation was lost (a timeout, a dropped
// connection, a node cut off mid-request) may hold a claim they have no id
// for. Retrying with the same Idempotency-Key returns it; without a key,
// GET /api/v1/sales/{id}/reservations/mine shows what they hold: their
// orders of the sale, and the units the stock store counts as theirs that
// have no order yet (claims on their way to the database, which become
// orders within seconds).

// PendingUnits is how many of held (the units the stock store counts the
// buyer as holding on a sale) are not yet in orders: held less the units
// of the buyer's orders that still hold stock (ordered or paid), never
// below 0 (an order cancelled and restored leaves the stock store's count
// first).
func PendingUnits(held int64, orders []*Order) int64 {
	for _, o := range orders {
		if o.Status == OrderPlaced || o.Status == OrderPaid {
			held -= o.Qty
		}
	}
	return max(held, 0)
}
