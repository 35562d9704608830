// Package lostclaim owns the answer for a claim the stock store forgot.
//
// Redis can lose writes it acknowledged (AOF everysec on a power loss, a
// failover to a replica that lagged). A buyer who was told "claimed" then
// polls an id that neither the database nor Redis knows. The id itself
// proves it was issued to that buyer (claimid.Minter), so the buyer is
// never told 404: while the claim may still be on its way (its event may
// sit in the outbox or the broker) it is pending; once nothing in flight
// can carry it (seckill.JudgeClaim), or after a bounded time whatever is
// known, it becomes a failed order with reason
// seckill.ReasonLostInStockStore, alerted like every other failed order. The failed order is recorded in the database,
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

// DefaultAfter is how long a forgotten claim stays pending at most: well
// above the relay → broker → writer latency, so that a claim whose event
// was published before Redis forgot it lands as an order first.
const DefaultAfter = 2 * time.Minute

// DefaultLookupLimit is how many lookups of ids no store has one buyer may
// make, on all nodes together. A claim id's tag is 24 bits (claimid.Minter):
// unlimited, a buyer could forge an id of their own that verifies after
// about 16 million guesses, and poll it into a lost_in_stock_store failed
// order and an alert. At 300 an hour that takes 55,000 buyer-hours,
// while a buyer whose claim was really lost polls it about 60 times
// (every 2 s until DefaultAfter) before it settles as a failed order,
// which later polls find in the database without a lookup.
var DefaultLookupLimit = seckill.RateLimit{Rate: 300, Period: time.Hour}

// DefaultMinAge is how long after its id was issued a claim is never
// judged lost: above a reserve call's budget.
const DefaultMinAge = 10 * time.Second

// Outbox tells the oldest entry of a sale's outbox (internal/redis).
type Outbox interface {
	OutboxOldest(ctx context.Context, saleID string) (oldest time.Time, empty bool, err error)
}

// Store is the part of seckill.OrderStore the resolver uses.
type Store interface {
	Order(ctx context.Context, reservationID string) (*seckill.Order, error)
	FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error)
	RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error
}

// Config tunes a Resolver. Zero values take the defaults.
type Config struct {
	// After is how long after its id was issued a forgotten claim turns
	// failed whatever else is known. Default DefaultAfter.
	After time.Duration
	// MinAge is how long after its id was issued it never does. Default
	// DefaultMinAge.
	MinAge time.Duration
	// Outbox and Backlog, if both set, let a forgotten claim fail as soon
	// as nothing in flight can carry it (seckill.JudgeClaim); without
	// them it waits out After.
	Outbox  Outbox
	Backlog func(ctx context.Context) (int64, error)
	Now     func() time.Time
	Logger  *slog.Logger
	// OnLost, if set, is told of every claim recorded as lost (a metric).
	OnLost func(f *seckill.FailedOrder)
	// Limiter, if set, counts each buyer's lookups against LookupLimit
	// (default DefaultLookupLimit); past it, Resolve answers ERATELIMITED
	// without looking at the id.
	Limiter     seckill.RateLimiter
	LookupLimit seckill.RateLimit
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
	defaults.Positive(&cfg.MinAge, min(DefaultMinAge, cfg.After))
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	if cfg.LookupLimit.IsZero() {
		cfg.LookupLimit = DefaultLookupLimit
	}
	return &Resolver{store: store, ids: ids, cfg: cfg}
}

// facts reads what is in flight for the sale, in JudgeClaim's order:
// the outbox, then the broker. A claim younger than MinAge or older than
// After needs no read.
func (r *Resolver) facts(ctx context.Context, saleID string, age time.Duration) seckill.ClaimFacts {
	f := seckill.ClaimFacts{Age: age, Backlog: -1}
	if age < r.cfg.MinAge || age >= r.cfg.After || r.cfg.Outbox == nil || r.cfg.Backlog == nil {
		return f
	}
	oldest, empty, err := r.cfg.Outbox.OutboxOldest(ctx, saleID)
	if err != nil {
		return f // the outbox may hold it: only After decides
	}
	f.OutboxEmpty, f.OutboxOldest = empty, r.cfg.Now().Sub(oldest)
	if n, err := r.cfg.Backlog(ctx); err == nil {
		f.Backlog = n
	}
	return f
}

// inFlight says what was in flight when a claim was judged lost.
func inFlight(f seckill.ClaimFacts) string {
	switch {
	case f.Backlog < 0:
		return "nothing known of the events in flight"
	case f.OutboxEmpty:
		return "the outbox and the broker empty"
	}
	return fmt.Sprintf("no outbox entry older than %s and the broker empty", f.OutboxOldest.Round(time.Millisecond))
}

// Resolve is asked about reservation id of userID after the database and
// the stock store were both found without it.
func (r *Resolver) Resolve(ctx context.Context, id, userID string) (seckill.LostClaim, error) {
	if err := r.countLookup(ctx, userID); err != nil {
		return seckill.LostClaim{}, err
	}
	issued, qty, ok := r.ids.Verify(id, userID)
	if !ok {
		return seckill.LostClaim{}, nil
	}
	c := seckill.LostClaim{Known: true, Qty: qty}
	saleID, _ := seckill.SaleIDOfReservation(id)
	now := r.cfg.Now()
	facts := r.facts(ctx, saleID, now.Sub(issued))
	if seckill.JudgeClaim(facts, seckill.ClaimPolicy{MinAge: r.cfg.MinAge, MaxAge: r.cfg.After}) != seckill.ClaimLost {
		return c, nil
	}
	f := &seckill.FailedOrder{
		ReservationID: id,
		SaleID:        saleID,
		UserID:        userID,
		Qty:           qty,
		Reason: fmt.Sprintf("%s: claimed %s, then neither the stock store nor the database had it %s later, with %s",
			seckill.ReasonLostInStockStore, issued.UTC().Format(time.RFC3339Nano), facts.Age.Round(time.Millisecond), inFlight(facts)),
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

var errTooManyLookups = seckill.Errorf(seckill.ERATELIMITED,
	"Too many lookups of reservations this server does not have; try again later.")

// countLookup counts one lookup of userID's. Every lookup counts, the
// id's tag right or wrong: were a guess that verifies exempt, the limit
// would stop no guesser.
func (r *Resolver) countLookup(ctx context.Context, userID string) error {
	if r.cfg.Limiter == nil {
		return nil
	}
	res, err := r.cfg.Limiter.Allow(ctx, "lostclaim:"+userID, r.cfg.LookupLimit)
	if err != nil {
		return fmt.Errorf("count lookups of unknown reservations: %w", err)
	}
	if !res.Allowed {
		return errTooManyLookups
	}
	return nil
}
