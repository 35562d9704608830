package eventdelivery

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// DefaultKeep is how long a delivered event stays in the outbox.
const DefaultKeep = 7 * 24 * time.Hour

// PruneBefore is the delivery time before which a delivered event is
// deleted at now when delivered events are kept keep; false when keep is
// not positive: they are kept for ever.
func PruneBefore(now time.Time, keep time.Duration) (time.Time, bool) {
	if keep <= 0 {
		return time.Time{}, false
	}
	return now.Add(-keep), true
}

// Expired reports whether d is deleted at now when delivered events are
// kept keep. Only delivered events expire: a pending one is still owed to
// the shop, and a dead one is the operator's evidence until redelivered.
func Expired(d *seckill.EventDelivery, now time.Time, keep time.Duration) bool {
	before, ok := PruneBefore(now, keep)
	return ok && d.State == seckill.DeliveryDelivered && d.DeliveredAt.Before(before)
}

// pruneRest is how many times a batch's duration a pass rests after it.
const pruneRest = 3

// DeliveredPruner is the outbox side of retention (internal/sqlstore).
type DeliveredPruner interface {
	// PruneDelivered deletes up to limit events delivered before before
	// (to the millisecond), the oldest first, and says how many it deleted.
	PruneDelivered(ctx context.Context, before time.Time, limit int) (int, error)
}

// PruneConfig configures a Pruner. Outbox and a positive Keep are required.
type PruneConfig struct {
	Outbox DeliveredPruner
	Keep   time.Duration
	// Every is the pause between passes, less up to a tenth by jitter so
	// that nodes started together do not prune together. Default 5m.
	Every time.Duration
	// Batch is the most events one statement deletes: each batch is a
	// transaction of its own, short enough not to hold up the order
	// writer. Default 1000.
	Batch int
	// Registerer takes the pruner's counter when set.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
	Jitter     func() float64
}

// Pruner deletes delivered events older than the retention, in batches,
// every so often. Every node that delivers events runs one: two nodes
// deleting the same rows is harmless, and a pass with nothing to delete
// is one index probe.
type Pruner struct {
	cfg     PruneConfig
	deleted prometheus.Counter
	svc     startstop.Worker
}

// NewPruner checks cfg and fills its defaults.
func NewPruner(cfg PruneConfig) (*Pruner, error) {
	if cfg.Outbox == nil || cfg.Keep <= 0 {
		return nil, errors.New("order event pruning: need an outbox and a positive retention")
	}
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Minute
	}
	if cfg.Batch < 1 {
		cfg.Batch = 1000
	}
	defaultHooks(&cfg.Logger, &cfg.Now, &cfg.Jitter)
	p := &Pruner{cfg: cfg, deleted: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_order_events_deleted_total",
		Help: "Delivered order events this node deleted from the outbox once older than the retention (--order-events-keep).",
	})}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(p.deleted)
	}
	return p, nil
}

// Start prunes every cfg.Every until Stop.
func (p *Pruner) Start(ctx context.Context) { p.svc.Start(ctx, p.run) }

// Stop stops pruning, waiting for a batch in flight at most until ctx
// ends. Safe to call twice.
func (p *Pruner) Stop(ctx context.Context) error { return p.svc.Stop(ctx) }

func (p *Pruner) run(ctx context.Context) {
	for {
		pause := p.cfg.Every - time.Duration(float64(p.cfg.Every)*0.1*min(max(p.cfg.Jitter(), 0), 1))
		if startstop.Sleep(ctx, pause) != nil {
			return
		}
		if n, err := p.Pass(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("order events: pruning failed; the next pass tries again", "deleted", n, "err", err)
		}
	}
}

// Pass deletes the expired events batch by batch until a batch comes back
// short, resting between batches, and returns how many it deleted. Each
// batch commits by itself: a pass cut short by ctx or an error keeps what
// it deleted.
func (p *Pruner) Pass(ctx context.Context) (int, error) {
	before, ok := PruneBefore(p.cfg.Now(), p.cfg.Keep)
	if !ok {
		return 0, nil
	}
	total := 0
	for ctx.Err() == nil {
		began := time.Now()
		n, err := p.cfg.Outbox.PruneDelivered(ctx, before, p.cfg.Batch)
		total += n
		p.deleted.Add(float64(n))
		if err != nil {
			return total, err
		}
		if n < p.cfg.Batch {
			break
		}
		// Rest thrice as long as the batch took: a backlog (a big sale's
		// week ending) is deleted at a quarter of the database's speed,
		// the order writer having it to itself the rest of the time.
		_ = startstop.Sleep(ctx, pruneRest*time.Since(began))
	}
	if total > 0 {
		p.cfg.Logger.Debug("order events: pruned delivered events", "deleted", total, "delivered_before", before)
	}
	return total, ctx.Err()
}
