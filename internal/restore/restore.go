// Package restore owns giving stock back: by an operator, a buyer's cancel
// or the payment timeout, all through the one Restore path, keyed by the
// reservation id.
//
// The database goes first (the order cancelled and its units back in the
// sale's stock, with the request recorded as redis_pending, in one
// transaction), then Redis (the units back in stock and in the buyer's
// limit). If Redis fails, the request stays redis_pending and a background
// loop retries it: until it succeeds the units are merely unsold, never sold
// twice. A restore that arrives before its order reached the database is
// parked; the order writer creates that order cancelled when it lands, and
// the loop finishes the Redis step. A request still parked after AlertAfter
// raises an alert for manual handling.
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Store is the database side of restoring (internal/sqlstore).
type Store interface {
	// RestoreOrder runs the database step in one transaction: an ordered
	// order is cancelled and its qty goes back to the sale (changed); a
	// failed order only records the request (changed, o nil); a cancelled
	// one changes nothing. Paid: ESTATECONFLICT; neither: ErrNotFound.
	RestoreOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *seckill.Order, changed bool, err error)
	// ParkRestore records a restore of a reservation with no order yet; an
	// existing request is returned unchanged.
	ParkRestore(ctx context.Context, reservationID, saleID, reason string, now time.Time) (*seckill.RestoreRequest, error)
	RestoreRequest(ctx context.Context, reservationID string) (*seckill.RestoreRequest, error)
	// RestoreRequests lists up to limit requests in state, oldest first.
	RestoreRequests(ctx context.Context, state seckill.RestoreState, limit int) ([]*seckill.RestoreRequest, error)
	// UpdateRestore records an attempt: Attempts+1, the new state and error,
	// and AlertedAt = now the first time alerted is true.
	UpdateRestore(ctx context.Context, reservationID string, state seckill.RestoreState, lastErr string, alerted bool, now time.Time) error
	// RestoreOrders is RestoreOrder for reservations of one sale, in order,
	// in one transaction; an error of the whole call writes nothing.
	RestoreOrders(ctx context.Context, saleID string, reservationIDs []string, reason string, now time.Time) ([]seckill.OrderRestore, error)
	// FinishRestores marks requests done in one statement; unknown ids are
	// skipped.
	FinishRestores(ctx context.Context, reservationIDs []string, lastErr string, now time.Time) error
}

// Stock is the Redis side of restoring (internal/redis).
type Stock interface {
	// RestoreReservation gives an active reservation's units back to the
	// stock and the buyer's limit in one script; false when already done.
	RestoreReservation(ctx context.Context, reservationID string) (restored bool, err error)
	// RestoreReservations is RestoreReservation for one sale's
	// reservations, in one script call.
	RestoreReservations(ctx context.Context, saleID string, reservationIDs []string) ([]seckill.ReservationRestore, error)
	// PublishRestocked tells every API node to clear its sold-out flag.
	PublishRestocked(ctx context.Context, saleID string) error
	SubscribeRestocked(ctx context.Context, fn func(saleID string)) error
}

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// RetryInterval is how often pending and parked requests are retried.
	// Default 5s.
	RetryInterval time.Duration
	// AlertAfter is how long a request may stay parked before it raises
	// an alert. Default 1h.
	AlertAfter time.Duration
	// BatchSize caps the requests of one state retried per pass. Default 500.
	BatchSize int
	Now       func() time.Time
	Logger    *slog.Logger
	// OnRestocked, if set, is called with a sale id whenever units of it
	// went back into Redis (this node's sold-out flag; others hear the
	// pub/sub announcement).
	OnRestocked func(saleID string)
	// OnAlert, if set, is told of every request that became stuck.
	OnAlert func(*seckill.RestoreRequest)
	// RedisTimeout bounds the Redis step of one Restore, so that a cancel
	// whose database step is done answers within its request's budget
	// while Redis is down or silent; the retry loop finishes the step.
	// Default 500ms.
	RedisTimeout time.Duration
}

// Service restores reservations. Restore may be called at any time; Start
// runs the retry loop, Stop ends it.
type Service struct {
	store Store
	stock Stock
	cfg   Config

	kick   chan struct{}
	worker startstop.Worker
}

// New returns a Service.
func New(store Store, stock Stock, cfg Config) *Service {
	defaults.Positive(&cfg.RetryInterval, 5*time.Second)
	defaults.Positive(&cfg.AlertAfter, time.Hour)
	defaults.Positive(&cfg.BatchSize, 500)
	defaults.Positive(&cfg.RedisTimeout, 500*time.Millisecond)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Service{store: store, stock: stock, cfg: cfg, kick: make(chan struct{}, 1)}
}

// Restore gives a reservation's units back. It answers Restored when this
// call did the database step, AlreadyRestored when an earlier call had,
// and RestoreParked when the reservation has no order yet. A paid order is
// an *Error with ESTATECONFLICT.
func (s *Service) Restore(ctx context.Context, reservationID, reason string) (seckill.RestoreResult, error) {
	saleID, ok := seckill.SaleIDOfReservation(reservationID)
	if !ok {
		return "", seckill.Errorf(seckill.EINVALID, "reservation_id is not a reservation id")
	}
	_, changed, err := s.store.RestoreOrder(ctx, reservationID, reason, s.cfg.Now())
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		req, err := s.store.ParkRestore(ctx, reservationID, saleID, reason, s.cfg.Now())
		if err != nil {
			return "", fmt.Errorf("restore %s: park: %w", reservationID, err)
		}
		if req.State != seckill.RestoreStateParked {
			// The order landed between the two calls and the database step
			// is done (by the park itself, or an earlier restore): finish
			// the Redis step now rather than on the next retry pass.
			if req.State == seckill.RestoreStateRedisPending {
				s.redisStep(ctx, reservationID, req.Attempts)
			}
			return seckill.AlreadyRestored, nil
		}
		s.cfg.Logger.Info("restore parked until the order lands", "reservation", reservationID, "reason", reason)
		return seckill.RestoreParked, nil
	case err != nil:
		return "", fmt.Errorf("restore %s: %w", reservationID, err)
	}
	if !changed {
		// Another restore did the database step. Finish its Redis step if
		// it is still pending, so a caller retrying after a Redis failure
		// helps the units back.
		if req, err := s.store.RestoreRequest(ctx, reservationID); err == nil && req.State == seckill.RestoreStateRedisPending {
			s.redisStep(ctx, req.ReservationID, req.Attempts)
		}
		return seckill.AlreadyRestored, nil
	}
	s.redisStep(ctx, reservationID, 0)
	return seckill.Restored, nil
}

// redisStep returns the units to Redis and records the outcome. A failure
// leaves the request redis_pending for the retry loop; it is not the
// caller's error, since the database step (the one that decides) is done.
func (s *Service) redisStep(ctx context.Context, reservationID string, attempts int) {
	log := s.cfg.Logger.With("reservation", reservationID)
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	restored, err := s.stock.RestoreReservation(rctx, reservationID)
	cancel()
	now := s.cfg.Now()
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		// Redis has no record (it lost its data, or the reservation never
		// reached it): there is no unit to give back there.
		log.Warn("restore: the stock store has no record of the reservation; nothing to give back in Redis")
		err = s.store.UpdateRestore(ctx, reservationID, seckill.RestoreStateDone, "no reservation record in the stock store", false, now)
	case err != nil:
		log.Warn("restore: Redis step failed; will retry", "attempt", attempts+1, "err", err)
		err = s.store.UpdateRestore(ctx, reservationID, seckill.RestoreStateRedisPending, err.Error(), false, now)
	default:
		err = s.store.UpdateRestore(ctx, reservationID, seckill.RestoreStateDone, "", false, now)
		if restored {
			s.restocked(ctx, reservationID)
		}
	}
	if err != nil {
		log.Warn("restore: recording the Redis step failed; will retry", "err", err)
	}
}

// restocked announces that a sale has stock again.
func (s *Service) restocked(ctx context.Context, reservationID string) {
	saleID, _ := seckill.SaleIDOfReservation(reservationID)
	s.restockedSale(ctx, saleID)
}

func (s *Service) restockedSale(ctx context.Context, saleID string) {
	if s.cfg.OnRestocked != nil {
		s.cfg.OnRestocked(saleID)
	}
	if err := s.stock.PublishRestocked(ctx, saleID); err != nil {
		// Other nodes' sold-out flags expire by themselves shortly.
		s.cfg.Logger.Warn("restore: announcing the restock failed", "sale", saleID, "err", err)
	}
}

// Kick asks the retry loop to run now (the order writer calls it after
// persisting, so a parked restore completes as soon as its order lands).
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Retry runs one pass: the Redis step of every redis_pending request, and
// a fresh try of every parked one, raising an alert for those parked
// longer than AlertAfter.
func (s *Service) Retry(ctx context.Context) error {
	pending, err := s.store.RestoreRequests(ctx, seckill.RestoreStateRedisPending, s.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("restore: list pending: %w", err)
	}
	bySale := map[string][]string{}
	var sales []string
	for _, r := range pending {
		sale, _ := seckill.SaleIDOfReservation(r.ReservationID)
		if bySale[sale] == nil {
			sales = append(sales, sale)
		}
		bySale[sale] = append(bySale[sale], r.ReservationID)
	}
	for _, sale := range sales {
		s.redisSteps(ctx, sale, bySale[sale])
	}
	parked, err := s.store.RestoreRequests(ctx, seckill.RestoreStateParked, s.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("restore: list parked: %w", err)
	}
	for _, r := range parked {
		res, err := s.Restore(ctx, r.ReservationID, r.Reason)
		if err != nil || res != seckill.RestoreParked {
			if err != nil {
				s.cfg.Logger.Warn("restore: retry of a parked request failed", "reservation", r.ReservationID, "err", err)
			}
			continue
		}
		now := s.cfg.Now()
		if r.AlertedAt.IsZero() && now.Sub(r.CreatedAt) >= s.cfg.AlertAfter {
			if err := s.store.UpdateRestore(ctx, r.ReservationID, seckill.RestoreStateParked, "no order after "+s.cfg.AlertAfter.String(), true, now); err != nil {
				s.cfg.Logger.Warn("restore: recording an alert failed", "reservation", r.ReservationID, "err", err)
				continue
			}
			r.AlertedAt = now
			s.cfg.Logger.Error("ALERT restore parked too long: no order for this reservation; handle it by hand",
				"reservation", r.ReservationID, "sale", r.SaleID, "reason", r.Reason, "parked_since", r.CreatedAt)
			if s.cfg.OnAlert != nil {
				s.cfg.OnAlert(r)
			}
		}
	}
	return nil
}

// Start runs Retry every RetryInterval, and at once on Kick, until Stop.
// A second Start, or a Start after Stop, does nothing.
func (s *Service) Start(ctx context.Context) {
	s.worker.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, s.cfg.RetryInterval, s.kick, func(ctx context.Context) {
			if err := s.Retry(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("restore retry pass failed", "err", err)
			}
		})
	})
}

// Stop ends the retry loop after the pass in hand. Safe to call twice, and
// without Start.
func (s *Service) Stop(ctx context.Context) error {
	return s.worker.StopNamed(ctx, "restore")
}
