// Package preheat owns loading sales into the stock store before they
// start: every sale is preheated at StartAt minus a lead time (10 minutes
// by default), or at once when it is created nearer its start, or on an
// operator's demand. Preheating is idempotent, so every API node may run a
// Scheduler; whichever gets there first loads the sale, and none resets it.
//
// Each pass also re-reads the rows of the sales already loaded, so an
// operator's change on any node (an edit, an early end, added stock)
// reaches every node's loaded list within one Interval; the node that
// made the change tells its own Scheduler at once (SaleChanged).
package preheat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// SaleLister is the part of seckill.SaleStore the scheduler reads.
type SaleLister interface {
	SalesStartingBefore(ctx context.Context, t, now time.Time) ([]*seckill.Sale, error)
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
}

// Preheater loads a sale into the stock store unless it is loaded, as
// seckill.StockStore's Preheat does; serve's is redis.Loader, which loads
// a sale whose row counts units sold held until it is healed.
type Preheater interface {
	Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error)
}

// Config tunes a Scheduler. Zero values take the defaults.
type Config struct {
	Lead time.Duration // how long before StartAt to preheat; default 10m
	// QueueOpensBefore is how long before its start a queue sale's
	// waiting room opens: such a sale is preheated then if that is
	// earlier than Lead (seckill.PreheatLead).
	QueueOpensBefore time.Duration
	Interval         time.Duration // how often to look for due sales; default 5s
	Now              func() time.Time
	Logger           *slog.Logger
}

// Scheduler preheats due sales in the background and remembers which sales
// this node has seen loaded (for metrics and the sold-out flag).
type Scheduler struct {
	sales SaleLister
	stock Preheater
	cfg   Config

	mu     sync.Mutex
	loaded map[string]*seckill.Sale

	worker startstop.Worker
}

// New returns a Scheduler; call Start to run it.
func New(sales SaleLister, stock Preheater, cfg Config) *Scheduler {
	defaults.Positive(&cfg.Lead, 10*time.Minute)
	defaults.Positive(&cfg.Interval, 5*time.Second)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Scheduler{sales: sales, stock: stock, cfg: cfg, loaded: map[string]*seckill.Sale{}}
}

// Due reports whether s should be in the stock store by now.
func (p *Scheduler) Due(s *seckill.Sale) bool {
	return p.due(s, p.cfg.Now())
}

func (p *Scheduler) due(s *seckill.Sale, now time.Time) bool {
	return !now.Before(s.StartAt.Add(-seckill.PreheatLead(s, p.cfg.Lead, p.cfg.QueueOpensBefore))) && now.Before(s.EndAt)
}

// MaxLead is the longest a sale is preheated before its start.
func (p *Scheduler) MaxLead() time.Duration { return max(p.cfg.Lead, p.cfg.QueueOpensBefore) }

// Preheat loads s now, whatever its start time (the operator's
// POST /admin/v1/sales/{id}/preheat). created is false when s was
// already loaded; nothing is reset then.
func (p *Scheduler) Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error) {
	created, err = p.stock.Preheat(ctx, s)
	if err != nil {
		return false, fmt.Errorf("preheat %s: %w", s.ID, err)
	}
	p.mu.Lock()
	p.keep(s, p.cfg.Now())
	p.mu.Unlock()
	if created {
		p.cfg.Logger.Info("sale preheated", "sale", s.ID, "stock", s.Stock, "start_at", s.StartAt)
	}
	return created, nil
}

// SaleCreated preheats s at once if it is already due. A failure is
// logged, not returned: the sale exists, and the next tick retries.
func (p *Scheduler) SaleCreated(ctx context.Context, s *seckill.Sale) {
	if !p.Due(s) {
		return
	}
	if _, err := p.Preheat(ctx, s); err != nil {
		p.cfg.Logger.Warn("preheat on create failed; the scheduler retries", "sale", s.ID, "err", err)
	}
}

// SaleChanged takes the row of a sale an operator changed on this node:
// it replaces the loaded row, or drops it if the sale has ended; a sale
// not loaded yet is preheated if due, as by SaleCreated. Other nodes see
// the change on their next Tick.
func (p *Scheduler) SaleChanged(ctx context.Context, s *seckill.Sale) {
	p.mu.Lock()
	_, seen := p.loaded[s.ID]
	if seen {
		p.keep(s, p.cfg.Now())
	}
	p.mu.Unlock()
	if !seen {
		p.SaleCreated(ctx, s)
	}
}

// keep puts s in the loaded list, or takes it out if it has ended at now;
// a row older than the one held (a lower Version: every change to a sale
// raises it) is ignored. p.mu is held.
func (p *Scheduler) keep(s *seckill.Sale, now time.Time) {
	if cur, ok := p.loaded[s.ID]; ok && cur.Version > s.Version {
		return
	}
	if !now.Before(s.EndAt) {
		delete(p.loaded, s.ID)
		return
	}
	p.loaded[s.ID] = s
}

// Loaded returns the sales this node has preheated or seen preheated and
// that have not ended yet.
func (p *Scheduler) Loaded() []*seckill.Sale {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*seckill.Sale, 0, len(p.loaded))
	for id, s := range p.loaded {
		if !now.Before(s.EndAt) {
			delete(p.loaded, id)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Tick preheats every due sale that this node has not yet seen loaded,
// and refreshes the rows of those it has: from the list of due sales, or
// read one by one for the loaded sales the list leaves out (ended early,
// or preheated by an operator before the lead).
func (p *Scheduler) Tick(ctx context.Context) error {
	now := p.cfg.Now()
	due, err := p.sales.SalesStartingBefore(ctx, now.Add(p.MaxLead()), now)
	if err != nil {
		return fmt.Errorf("preheat: list due sales: %w", err)
	}
	listed := make(map[string]bool, len(due))
	var firstErr error
	for _, s := range due {
		if !p.due(s, now) {
			continue // a first come sale within the queue's lead, not its own
		}
		listed[s.ID] = true
		p.mu.Lock()
		_, seen := p.loaded[s.ID]
		if seen {
			p.keep(s, now)
		}
		p.mu.Unlock()
		if seen {
			continue
		}
		if _, err := p.Preheat(ctx, s); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	var unlisted []string
	p.mu.Lock()
	for id := range p.loaded {
		if !listed[id] {
			unlisted = append(unlisted, id)
		}
	}
	p.mu.Unlock()
	for _, id := range unlisted {
		s, err := p.sales.Sale(ctx, id)
		p.mu.Lock()
		switch {
		case errors.Is(err, seckill.ErrNotFound):
			delete(p.loaded, id)
		case err == nil:
			p.keep(s, now)
		case firstErr == nil:
			firstErr = fmt.Errorf("preheat: refresh sale %s: %w", id, err)
		}
		p.mu.Unlock()
	}
	return firstErr
}

// Start runs a first Tick, then one every Interval, until Stop. A second
// Start, or a Start after Stop, does nothing.
func (p *Scheduler) Start(ctx context.Context) {
	p.worker.StartEvery(ctx, p.cfg.Interval, p.tickAndLog)
}

func (p *Scheduler) tickAndLog(ctx context.Context) {
	if err := p.Tick(ctx); err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("preheat tick failed", "err", err)
	}
}

// Stop ends the background loop and waits for it. Safe to call twice, and
// without Start.
func (p *Scheduler) Stop(ctx context.Context) error {
	return p.worker.StopNamed(ctx, "preheat")
}
