package lostclaim

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// A claim the stock store forgot is known only to its buyer: if they
// never poll, nothing would record it. So each node remembers the claims
// it answered for a while (Journal), and after a fault (a heal of lost
// writes) the Sweeper looks them up and resolves those no store has, as
// the buyer's poll would.

// Records reads the stock store's records of reservations
// (internal/redis).
type Records interface {
	ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error)
}

// SweepConfig tunes a Sweeper. Zero values take the defaults.
type SweepConfig struct {
	// Window is how long a claim is remembered, and how long a fault
	// keeps the sweeper looking. Default 2m.
	Window time.Duration
	// Max caps the claims remembered; past it the oldest are forgotten
	// (and counted). Default 200,000.
	Max int
	// Interval between sweeps while armed. Default 2s.
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// Sweeper remembers this node's claims and, armed by a fault, resolves
// the forgotten ones in the background. It is a seckill.Reserver in front
// of the node's own, so that it sees every claim answered.
type Sweeper struct {
	next     seckill.Reserver
	soldOut  func(saleID string, now time.Time) bool // next's, if it has one
	resolver *Resolver
	records  Records
	cfg      SweepConfig

	mu        sync.Mutex
	claims    []claimed // oldest first
	forgotten int64     // claims dropped for Max before a sweep saw them

	armedUntil atomic.Int64 // unix nanos
	wake       chan struct{}
	worker     startstop.Worker
}

type claimed struct {
	id, user string
	qty      int64
	at       time.Time
}

// NewSweeper returns a Sweeper in front of next, resolving through r and
// reading the stock store's records from records.
func NewSweeper(next seckill.Reserver, r *Resolver, records Records, cfg SweepConfig) *Sweeper {
	defaults.Positive(&cfg.Window, 2*time.Minute)
	defaults.Positive(&cfg.Max, 200_000)
	defaults.Positive(&cfg.Interval, 2*time.Second)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	s := &Sweeper{next: next, resolver: r, records: records, cfg: cfg, wake: make(chan struct{}, 1)}
	if f, ok := next.(interface {
		AnswerSoldOutAt(saleID string, now time.Time) bool
	}); ok {
		s.soldOut = f.AnswerSoldOutAt
	}
	return s
}

// Reserve is next's, remembering a claim it answered.
func (s *Sweeper) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	res, err := s.next.Reserve(ctx, saleID, req)
	if err == nil && res.Outcome.Claimed() {
		s.remember(claimed{id: res.ReservationID, user: req.UserID, qty: res.Qty, at: s.cfg.Now()})
	}
	return res, err
}

// AnswerSoldOutAt is next's local sold-out flag (soldout.Gate's), so
// that the API still answers a sold-out sale before it decodes the
// request; false when next has none.
func (s *Sweeper) AnswerSoldOutAt(saleID string, now time.Time) bool {
	return s.soldOut != nil && s.soldOut(saleID, now)
}

func (s *Sweeper) remember(c claimed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.claims) >= s.cfg.Max {
		// A quarter at once: the copy is paid once per Max/4 claims.
		drop := max(len(s.claims)-s.cfg.Max+1, s.cfg.Max/4)
		if s.armedUntil.Load() > c.at.UnixNano() {
			s.forgotten += int64(drop)
		}
		s.claims = append(s.claims[:0], s.claims[drop:]...)
	}
	s.claims = append(s.claims, c)
}

// Arm starts sweeping at once and for Window: the stock store lost
// writes (a heal), so claims answered before may be gone.
func (s *Sweeper) Arm() {
	s.armedUntil.Store(s.cfg.Now().Add(s.cfg.Window).UnixNano())
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the sweeps until Stop.
func (s *Sweeper) Start(ctx context.Context) {
	s.worker.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, s.cfg.Interval, s.wake, s.tick)
	})
}

// Stop ends the sweeps. Safe to call twice.
func (s *Sweeper) Stop(ctx context.Context) error { return s.worker.Stop(ctx) }

// tick forgets claims past Window and, while armed, sweeps the rest.
func (s *Sweeper) tick(ctx context.Context) {
	now := s.cfg.Now()
	s.mu.Lock()
	keep := 0
	for keep < len(s.claims) && now.Sub(s.claims[keep].at) > s.cfg.Window {
		keep++
	}
	s.claims = append(s.claims[:0], s.claims[keep:]...)
	if now.UnixNano() > s.armedUntil.Load() {
		s.mu.Unlock()
		return
	}
	todo := make([]claimed, 0, len(s.claims))
	for _, c := range s.claims {
		if now.Sub(c.at) >= s.resolver.cfg.MinAge {
			todo = append(todo, c)
		}
	}
	forgotten := s.forgotten
	s.forgotten = 0
	s.mu.Unlock()
	if forgotten > 0 {
		s.cfg.Logger.Warn("lost-claim sweeper: claims forgotten unswept (over the journal's cap); their buyers' polls still resolve them", "claims", forgotten)
	}
	settled := s.sweep(ctx, todo)
	if len(settled) == 0 {
		return
	}
	s.mu.Lock()
	out := s.claims[:0]
	for _, c := range s.claims {
		if !settled[c.id] {
			out = append(out, c)
		}
	}
	clear(s.claims[len(out):])
	s.claims = out
	s.mu.Unlock()
}

// sweepPage is how many records one stock-store read asks for.
const sweepPage = 1000

// sweep resolves the claims of todo that no store has, and returns those
// settled: held by the stock store (their events are on their way), in
// the database, or resolved failed now.
func (s *Sweeper) sweep(ctx context.Context, todo []claimed) map[string]bool {
	settled := map[string]bool{}
	bySale := map[string][]claimed{}
	for _, c := range todo {
		sale, _ := seckill.SaleIDOfReservation(c.id)
		bySale[sale] = append(bySale[sale], c)
	}
	lost := 0
	for sale, cs := range bySale {
		for len(cs) > 0 && ctx.Err() == nil {
			page := cs[:min(len(cs), sweepPage)]
			cs = cs[len(page):]
			ids := make([]string, len(page))
			for i, c := range page {
				ids[i] = c.id
			}
			recs, err := s.records.ReservationsOf(ctx, sale, ids)
			if err != nil {
				s.cfg.Logger.Warn("lost-claim sweeper: reading the stock store's records failed", "sale", sale, "err", err)
				break
			}
			for _, c := range page {
				if _, ok := recs[c.id]; ok {
					settled[c.id] = true
					continue
				}
				done, failed, err := s.resolve(ctx, c)
				if err != nil {
					s.cfg.Logger.Warn("lost-claim sweeper: resolving a claim failed", "reservation", c.id, "err", err)
					continue
				}
				settled[c.id] = done
				if failed {
					lost++
				}
			}
		}
	}
	if lost > 0 {
		s.cfg.Logger.Warn("lost-claim sweeper: claims the stock store forgot recorded as failed", "claims", lost)
	}
	return settled
}

// resolve settles one claim the stock store has no record of: the
// database's order or failed order, or the resolver's judgement.
func (s *Sweeper) resolve(ctx context.Context, c claimed) (done, failed bool, err error) {
	if _, err := s.resolver.store.Order(ctx, c.id); err == nil {
		return true, false, nil
	} else if !errors.Is(err, seckill.ErrNotFound) {
		return false, false, err
	}
	if _, err := s.resolver.store.FailedOrder(ctx, c.id); err == nil {
		return true, false, nil
	} else if !errors.Is(err, seckill.ErrNotFound) {
		return false, false, err
	}
	lc, err := s.resolver.Resolve(ctx, c.id, c.user)
	if err != nil {
		return false, false, err
	}
	return lc.Order != nil || lc.Failed != nil, lc.Failed != nil && lc.Order == nil, nil
}
