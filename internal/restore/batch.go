package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// Outcome answers one reservation of RestoreAll.
type Outcome struct {
	Result seckill.RestoreResult
	Err    error
}

// RestoreAll restores reservations of one sale as Restore restores each,
// at the cost of a few calls for the whole batch instead of several per
// reservation: one database transaction (RestoreOrders), one Redis script
// call (RestoreReservations), one statement recording them done
// (FinishRestores) and at most one restock announcement. outcomes[i]
// answers reservationIDs[i] as Restore would. The payment-timeout sweeper
// gives back the units of its expired orders here.
//
// A reservation the database has no order for goes the one-by-one way
// (it is parked). When the database step fails as a whole, every outcome
// carries that error and nothing was restored; when the Redis step fails,
// the database step stands (the requests stay redis_pending for the retry
// loop), as with Restore.
func (s *Service) RestoreAll(ctx context.Context, saleID string, reservationIDs []string, reason string) []Outcome {
	out := make([]Outcome, len(reservationIDs))
	if len(reservationIDs) == 0 {
		return out
	}
	db, err := s.store.RestoreOrders(ctx, saleID, reservationIDs, reason, s.cfg.Now())
	if err != nil {
		err = fmt.Errorf("restore %d reservations of sale %s: %w", len(reservationIDs), saleID, err)
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	var redisIDs []string
	for i, id := range reservationIDs {
		r := db[i]
		switch {
		case errors.Is(r.Err, seckill.ErrNotFound):
			out[i].Result, out[i].Err = s.Restore(ctx, id, reason)
		case r.Err != nil:
			out[i].Err = fmt.Errorf("restore %s: %w", id, r.Err)
		case r.Changed:
			out[i].Result = seckill.Restored
			redisIDs = append(redisIDs, id)
		default:
			// Another restore did the database step; its Redis step may be
			// pending still. Running it again is harmless (the script
			// finds the reservation restored) and finishes it if not.
			out[i].Result = seckill.AlreadyRestored
			redisIDs = append(redisIDs, id)
		}
	}
	s.redisSteps(ctx, saleID, redisIDs)
	return out
}

// redisSteps is redisStep for reservations of one sale whose database
// step is done, in one script call, recording the outcomes in one
// statement per kind and announcing the restock once.
func (s *Service) redisSteps(ctx context.Context, saleID string, ids []string) {
	if len(ids) == 0 {
		return
	}
	log := s.cfg.Logger.With("sale", saleID)
	restored := false
	for start := 0; start < len(ids); start += maxRedisBatch {
		chunk := ids[start:min(start+maxRedisBatch, len(ids))]
		results, err := s.stock.RestoreReservations(ctx, saleID, chunk)
		if err != nil {
			// The requests stay redis_pending for the retry loop, each
			// with this attempt recorded, as redisStep records it.
			log.Warn("restore: Redis step of a batch failed; will retry", "reservations", len(chunk), "err", err)
			for _, id := range chunk {
				if err := s.store.UpdateRestore(ctx, id, seckill.RestoreStateRedisPending, err.Error(), false, s.cfg.Now()); err != nil {
					log.Warn("restore: recording the Redis step failed; will retry", "reservation", id, "err", err)
				}
			}
			continue
		}
		var done, unknown []string
		for i, r := range results {
			switch {
			case errors.Is(r.Err, seckill.ErrNotFound):
				unknown = append(unknown, chunk[i])
			case r.Err != nil:
				log.Warn("restore: Redis step failed; will retry", "reservation", chunk[i], "err", r.Err)
				if err := s.store.UpdateRestore(ctx, chunk[i], seckill.RestoreStateRedisPending, r.Err.Error(), false, s.cfg.Now()); err != nil {
					log.Warn("restore: recording the Redis step failed; will retry", "reservation", chunk[i], "err", err)
				}
			default:
				done = append(done, chunk[i])
				restored = restored || r.Restored
			}
		}
		if len(unknown) > 0 {
			log.Warn("restore: the stock store has no record of these reservations; nothing to give back in Redis", "reservations", len(unknown))
		}
		if err := s.store.FinishRestores(ctx, unknown, "no reservation record in the stock store", s.cfg.Now()); err != nil {
			log.Warn("restore: recording the Redis step failed; will retry", "reservations", len(unknown), "err", err)
		}
		if err := s.store.FinishRestores(ctx, done, "", s.cfg.Now()); err != nil {
			log.Warn("restore: recording the Redis step failed; will retry", "reservations", len(done), "err", err)
		}
	}
	if restored {
		s.restockedSale(ctx, saleID)
	}
}

// maxRedisBatch caps the reservations of one restore script call (the
// Redis store's own limit is higher).
const maxRedisBatch = 500

// CancelOrders restores the reservations of orders, all of one sale, for
// reason through RestoreAll, and answers each order as a canceller does
// (paytimeout.Config.CancelBatch): nil once restored, alreadyDone where
// an earlier restore got there first, else the error.
func (s *Service) CancelOrders(ctx context.Context, orders []*seckill.Order, reason string, alreadyDone error) []error {
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.ReservationID
	}
	errs := make([]error, len(orders))
	for i, out := range s.RestoreAll(ctx, orders[0].SaleID, ids, reason) {
		errs[i] = out.Err
		if out.Err == nil && out.Result == seckill.AlreadyRestored {
			errs[i] = alreadyDone
		}
	}
	return errs
}
