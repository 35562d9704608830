// Package lostclaim owns the answer for a claim the stock store forgot.
//
// Redis can lose writes it acknowledged (AOF everysec on a power loss, a
// failover to a replica that lagged). A buyer who was told "claimed" then
// polls an id that neither the database nor Redis knows. The id itself
// proves it was issued to that buyer (claimid.Minter), so the buyer is
// never told 404: while the claim may still be on its way (its event may
// sit in the broker) it is pending; after a bounded time it becomes a
// failed order with reason seckill.ReasonLostInStockStore, alerted like
// every other failed order. The failed order is recorded in the database,
// which refuses it if the order landed first, and makes a late order a
// duplicate: a claim never ends as both.
package lostclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// DefaultAfter is how long a forgotten claim stays pending: well above
// the relay → broker → writer latency, so that a claim whose event was
// published before Redis forgot it lands as an order first.
const DefaultAfter = 2 * time.Minute

// Store is the part of seckill.OrderStore the resolver uses.
type Store interface {
	Order(ctx context.Context, reservationID string) (*seckill.Order, error)
	FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error)
	RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error
}

// Config tunes a Resolver. Zero values take the defaults.
type Config struct {
	// After is how long after its id was issued a forgotten claim turns
	// failed. Default DefaultAfter.
	After  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
	// OnLost, if set, is told of every claim recorded as lost (a metric).
	OnLost func(f *seckill.FailedOrder)
}

// Resolver decides about claims no store has.
type Resolver struct {
	store Store
	ids   *claimid.Minter
	cfg   Config
}

// New returns a Resolver for ids minted by ids, recording into store.
func New(store Store, ids *claimid.Minter, cfg Config) *Resolver {
	defaults.Positive(&cfg.After, DefaultAfter)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Resolver{store: store, ids: ids, cfg: cfg}
}

// Resolve is asked about reservation id of userID after the database and
// the stock store were both found without it.
func (r *Resolver) Resolve(ctx context.Context, id, userID string) (seckill.LostClaim, error) {
	issued, qty, ok := r.ids.Verify(id, userID)
	if !ok {
		return seckill.LostClaim{}, nil
	}
	c := seckill.LostClaim{Known: true, Qty: qty}
	now := r.cfg.Now()
	if now.Sub(issued) < r.cfg.After {
		return c, nil
	}
	saleID, _ := seckill.SaleIDOfReservation(id)
	f := &seckill.FailedOrder{
		ReservationID: id,
		SaleID:        saleID,
		UserID:        userID,
		Qty:           qty,
		Reason: fmt.Sprintf("%s: claimed %s, then neither the stock store nor the database had it after %s",
			seckill.ReasonLostInStockStore, issued.UTC().Format(time.RFC3339Nano), r.cfg.After),
		Attempts:  0,
		CreatedAt: now,
	}
	err := r.store.RecordFailedOrder(ctx, f)
	if err == nil {
		r.cfg.Logger.Error("ALERT lost claim: the stock store forgot a claimed reservation that never reached the database",
			"reservation", id, "sale", saleID, "user", userID, "qty", qty, "claimed_at", issued.UTC())
		if r.cfg.OnLost != nil {
			r.cfg.OnLost(f)
		}
		c.Failed = f
		return c, nil
	} else if !errors.Is(err, seckill.ErrDuplicate) {
		return seckill.LostClaim{}, fmt.Errorf("record lost claim %s: %w", id, err)
	}
	// It settled meanwhile: an order landed, or another poll recorded it.
	if o, err := r.store.Order(ctx, id); err == nil {
		c.Order = o
		return c, nil
	} else if !errors.Is(err, seckill.ErrNotFound) {
		return seckill.LostClaim{}, fmt.Errorf("lost claim %s: %w", id, err)
	}
	fo, err := r.store.FailedOrder(ctx, id)
	if err != nil {
		return seckill.LostClaim{}, fmt.Errorf("lost claim %s: %w", id, err)
	}
	c.Failed = fo
	return c, nil
}
