package seckill

// PendingUnits is how many of held (the stock store's count of a buyer's
// units) are in no order yet, for GET …/reservations/mine after a lost answer.
// Never below 0: a restore leaves the stock store's count first.
func PendingUnits(held int64, orders []*Order) int64 {
	for _, o := range orders {
		if o.Status == OrderPlaced || o.Status == OrderPaid {
			held -= o.Qty
		}
	}
	return max(held, 0)
}
