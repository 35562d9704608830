// Package admitpace owns the pace of adaptive queue sales (docs/fairness.md):
// every Interval each node takes the mean latency of the ticket holders'
// claims it served, steps each live adaptive sale's rate by
// seckill.NextAdmitRate, and moves the sale's shared pace on in the stock
// store at that rate. A queue sale at a fixed admit_per_second needs none
// of it: its pace is a formula of the clock.
package admitpace

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// DefaultInterval is how often a node adapts the rates.
const DefaultInterval = time.Second

// Store keeps the shared pace of adaptive queue sales
// (internal/redis.Queue).
type Store interface {
	AdvancePace(ctx context.Context, s *seckill.Sale, rate int64) (seckill.QueuePace, error)
	Pace(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error)
}

// LatencySource gives the mean latency of the claims served since its last
// call; n is how many there were.
type LatencySource interface {
	Take() (mean time.Duration, n int64)
}

// Keeper keeps each sale's pace as this node moved it in the database
// (internal/sqlstore.PlaceStore), from where a heal puts it back in a
// stock store that lost it.
type Keeper interface {
	KeepPace(ctx context.Context, saleID string, p seckill.QueuePace) error
}

// Config wires a Pacer. Sales, Store and Latency are required.
type Config struct {
	Sales   interface{ Loaded() []*seckill.Sale }
	Store   Store
	Latency LatencySource
	// Keeper, if set, is given every pace this node moved.
	Keeper Keeper
	// Interval between adaptation steps. Default 1s.
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// Pacer adapts this node's rate for every live adaptive queue sale and
// answers their pace.
type Pacer struct {
	cfg    Config
	worker startstop.Worker

	mu    sync.Mutex
	sales map[string]paced
}

type paced struct {
	rate int64 // this node's rate for the sale
	pace seckill.QueuePace
	at   time.Time // when pace was read or moved
}

// New returns a Pacer.
func New(cfg Config) *Pacer {
	defaults.Positive(&cfg.Interval, DefaultInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pacer{cfg: cfg, sales: map[string]paced{}}
}

// Start runs a Pass every Interval until Stop.
func (p *Pacer) Start(ctx context.Context) {
	p.worker.StartEvery(ctx, p.cfg.Interval, func(ctx context.Context) {
		if err := p.Pass(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.ErrorContext(ctx, "admission pace", "err", err)
		}
	})
}

// Stop ends the loop, waiting for a pass in progress. Safe twice.
func (p *Pacer) Stop(ctx context.Context) error { return p.worker.StopNamed(ctx, "admission pacer") }

// Pass takes the latency of the claims since the last pass once, and moves
// every live adaptive queue sale on at its next rate. Without claims it
// only reads the pace: the shared pace moves on by itself, at the rate the
// nodes that served claims set.
func (p *Pacer) Pass(ctx context.Context) error {
	mean, n := p.cfg.Latency.Take()
	now := p.cfg.Now()
	var first error
	live := map[string]bool{}
	for _, s := range p.cfg.Sales.Loaded() {
		b, ok := s.Admission.Bounds()
		if !ok || now.Before(s.StartAt) || !now.Before(s.EndAt) {
			continue
		}
		live[s.ID] = true
		p.mu.Lock()
		cur, seen := p.sales[s.ID]
		p.mu.Unlock()
		if !seen || n == 0 {
			// A node that served no claims says nothing of the load: it
			// reads the pace and leaves the rate to the nodes that did
			// (and a node new to the sale starts from the rate in force).
			pace, err := p.cfg.Store.Pace(ctx, s)
			if err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			cur = paced{rate: pace.Rate, pace: pace, at: now}
			if n == 0 {
				p.mu.Lock()
				p.sales[s.ID] = cur
				p.mu.Unlock()
				continue
			}
		}
		next := seckill.NextAdmitRate(cur.rate, mean, true, b)
		pace, err := p.cfg.Store.AdvancePace(ctx, s, next)
		if seckill.ErrorCode(err) == seckill.ETRYLATER {
			continue // the sale heals: its pace comes back from the Keeper's
		} else if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if p.cfg.Keeper != nil {
			if err := p.cfg.Keeper.KeepPace(ctx, s.ID, pace); err != nil && first == nil {
				first = err // moved all the same: the next step keeps a later one
			}
		}
		if next != cur.rate {
			p.cfg.Logger.InfoContext(ctx, "admission rate adapted", "sale_id", s.ID, "rate", next, "was", cur.rate,
				"mean_latency", mean, "claims", n)
		}
		p.mu.Lock()
		p.sales[s.ID] = paced{rate: next, pace: pace, at: now}
		p.mu.Unlock()
	}
	p.mu.Lock()
	for id := range p.sales {
		if !live[id] {
			delete(p.sales, id)
		}
	}
	p.mu.Unlock()
	return first
}

// Pace is how far the queue sale s's admission has got: its fixed rate
// from the start, or the adaptive pace as this node last moved or read it
// (read again from the store once older than Interval, when another
// node moves it).
func (p *Pacer) Pace(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error) {
	if _, ok := s.Admission.Bounds(); !ok {
		return seckill.FixedQueuePace(s), nil
	}
	now := p.cfg.Now()
	p.mu.Lock()
	cur, ok := p.sales[s.ID]
	p.mu.Unlock()
	if ok && now.Sub(cur.at) < p.cfg.Interval {
		return cur.pace, nil
	}
	pace, err := p.cfg.Store.Pace(ctx, s)
	if err != nil {
		return pace, err
	}
	p.mu.Lock()
	if cur, ok := p.sales[s.ID]; ok {
		cur.pace, cur.at = pace, now
		p.sales[s.ID] = cur
	}
	p.mu.Unlock()
	return pace, nil
}

// Latency is a LatencySource: the mean of the durations observed since the
// last Take.
type Latency struct {
	sum, n atomic.Int64
}

// Observe adds one claim's latency.
func (l *Latency) Observe(d time.Duration) {
	l.sum.Add(int64(d))
	l.n.Add(1)
}

// Take returns the mean since the last Take and starts over. Observations
// racing it land in one window or the next, never lost.
func (l *Latency) Take() (time.Duration, int64) {
	n := l.n.Swap(0)
	sum := l.sum.Swap(0)
	if n <= 0 {
		l.sum.Add(sum) // an Observe between the swaps: keep its time for the next window
		l.n.Add(n)
		return 0, 0
	}
	return time.Duration(sum / n), n
}

// Timed is a Reserver that observes how long each claim through Next takes.
type Timed struct {
	Next    seckill.Reserver
	Latency *Latency
}

func (t Timed) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	start := time.Now()
	res, err := t.Next.Reserve(ctx, saleID, req)
	t.Latency.Observe(time.Since(start))
	return res, err
}
