package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// testRestoreReservationsMatchesOneByOne: RestoreReservations answers
// every id of a mixed batch (several units of one buyer, an id listed
// twice, one restored before, an id with no record, one of another sale)
// as RestoreReservation called on each in turn answers its twin in
// another sale, and leaves the same stock, limits and records behind.
func testRestoreReservationsMatchesOneByOne(t *testing.T, newStore func(t *testing.T) RestoringStockStore) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	build := func() (*seckill.Sale, []string) {
		sale := preheatedSale(t, store, 10, 4)
		reqs := []seckill.ReserveRequest{
			stockRequest(sale.ID, "u1", 2, ""), stockRequest(sale.ID, "u1", 1, ""),
			stockRequest(sale.ID, "u2:with:colons", 3, "k"), stockRequest(sale.ID, "u3", 1, ""),
			stockRequest(sale.ID, "u4", 1, ""),
		}
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, reqs...), seckill.OutcomeReserved, seckill.OutcomeReserved,
			seckill.OutcomeReserved, seckill.OutcomeReserved, seckill.OutcomeReserved)
		wantRestore(t, store, reqs[3].ReservationID, true)
		return sale, []string{
			reqs[0].ReservationID, reqs[1].ReservationID, reqs[2].ReservationID,
			reqs[0].ReservationID,                             // twice
			reqs[3].ReservationID,                             // restored before
			seckill.NewReservationID(sale.ID, time.Now()),     // no record
			seckill.NewReservationID("othersale", time.Now()), // another sale
		}
	}
	batchSale, batchIDs := build()
	oneSale, oneIDs := build()

	got, err := store.RestoreReservations(ctx, batchSale.ID, batchIDs)
	if err != nil {
		t.Fatalf("RestoreReservations: %v", err)
	}
	if len(got) != len(batchIDs) {
		t.Fatalf("RestoreReservations answered %d of %d", len(got), len(batchIDs))
	}
	for i, id := range oneIDs {
		restored, err := store.RestoreReservation(ctx, id)
		if got[i].Restored != restored || (got[i].Err == nil) != (err == nil) ||
			errors.Is(got[i].Err, seckill.ErrNotFound) != errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("id %d: batch answered %+v; one by one %v, %v", i, got[i], restored, err)
		}
	}
	wantStockLevel(t, store, batchSale.ID, 10, 1)
	wantStockLevel(t, store, oneSale.ID, 10, 1)
	batchRecs, oneRecs := restoreRecords(t, store, batchSale.ID), restoreRecords(t, store, oneSale.ID)
	restoredCount := func(recs []seckill.ReservationRecord) (n int) {
		for _, r := range recs {
			if r.Restored {
				n++
			}
		}
		return n
	}
	if len(batchRecs) != len(oneRecs) || restoredCount(batchRecs) != 4 || restoredCount(oneRecs) != 4 {
		t.Errorf("records: batch %+v; one by one %+v; want 5 each, 4 restored", batchRecs, oneRecs)
	}
	// Every buyer's limit is free again but u4's.
	for _, s := range []*seckill.Sale{batchSale, oneSale} {
		wantStockOutcomes(t, stockReserve(t, store, s.ID, stockRequest(s.ID, "u1", 4, ""), stockRequest(s.ID, "u2:with:colons", 4, ""),
			stockRequest(s.ID, "u4", 4, "")), seckill.OutcomeReserved, seckill.OutcomeReserved, seckill.OutcomeLimitExceeded)
	}
	if res, err := store.RestoreReservations(ctx, batchSale.ID, nil); err != nil || len(res) != 0 {
		t.Errorf("RestoreReservations of nothing = %v, %v", res, err)
	}
}
