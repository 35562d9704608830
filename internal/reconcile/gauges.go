package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Counts are a sale's running counters, in the database and in the stock
// store, each kept by the steps that change what it counts (the sale's
// stock by the transactions that create, cancel and restore orders; the
// stock hash's reserved and restored units by the reserve and restore
// scripts) or over the few rows still open (failed orders, unfinished
// restores). Reading them costs the same whatever the sale's size: they
// feed the seckill_reconcile_* gauges, while the reservation-by-reservation
// comparison (Reconcile) is for `seckill reconcile`, the admin endpoint and
// a sale's archiving.
type Counts struct {
	SaleID    string
	CheckedAt time.Time

	// The database.
	Stock           int64 // units put on sale
	Unsold          int64 // units in no order ordered or paid
	FailedOrders    int64
	FailedUnits     int64
	RestoresParked  int64
	RestoresPending int64 // waiting for their Redis step
	RestoresAlerted int64

	// The stock store.
	Loaded       bool // the sale is in the stock store
	RedisTotal   int64
	Reserved     int64 // units of active reservations
	Restored     int64 // units given back so far
	Reservations int64 // reservation records
	OutboxLen    int64
}

// Sold is the database's units in orders ordered or paid.
func (c Counts) Sold() int64 { return c.Stock - c.Unsold }

// Oversold is the units sold beyond the stock by either store's count.
func (c Counts) Oversold() int64 {
	over := max(0, c.Sold()-c.Stock, -c.Unsold)
	if c.Loaded {
		over = max(over, c.Reserved-c.RedisTotal)
	}
	return over
}

// Unrecorded is the units Redis holds as reserved that the database has
// neither in an order nor in a failed order: in flight (in the outbox, in
// the broker, in a writer's batch) or, if the database stops catching up,
// lost. Restores on their way (a failed order's, or one whose Redis step
// is pending) may hide or add a few units; it is never negative.
func (c Counts) Unrecorded() int64 {
	if !c.Loaded {
		return 0
	}
	return max(0, c.Reserved-c.Sold()-c.FailedUnits)
}

// Gauges exports the counts; balanced is the verdict the caller reached
// (see GaugeWorker).
func (c Counts) Gauges(balanced bool) []Gauge {
	b := 0.0
	if balanced {
		b = 1
	}
	return []Gauge{
		{"seckill_reconcile_balanced", "1 unless the sale's counters show units oversold, a stuck restore alert, or units claimed in Redis that the database has stopped catching up with.", b},
		{"seckill_reconcile_oversold_units", "Units sold beyond the stock (must be 0; page on any other value).", float64(c.Oversold())},
		{"seckill_reconcile_unrecorded_units", "Units reserved in Redis that the database has in no order or failed order yet: in flight, or lost if it does not fall.", float64(c.Unrecorded())},
		{"seckill_reconcile_sold_units", "Units in orders ordered or paid, by the database.", float64(c.Sold())},
		{"seckill_reconcile_reserved_units", "Units of active reservations, by Redis.", float64(c.Reserved)},
		{"seckill_reconcile_restored_units", "Units given back to Redis by restores.", float64(c.Restored)},
		{"seckill_reconcile_reservations", "Reservation records in Redis.", float64(c.Reservations)},
		{"seckill_reconcile_failed_orders", "Failed orders of the sale.", float64(c.FailedOrders)},
		{"seckill_reconcile_restores_parked", "Restore requests parked, waiting for their order.", float64(c.RestoresParked)},
		{"seckill_reconcile_restores_alerted", "Restore requests not done that raised a stuck alert.", float64(c.RestoresAlerted)},
		{"seckill_reconcile_outbox_entries", "Reservations in the outbox, not yet relayed (the metric keeps its name from when an outbox entry was one reservation).", float64(c.OutboxLen)},
		{"seckill_reconcile_last_run_timestamp_seconds", "When the sale's counters were last read (Unix time).", float64(c.CheckedAt.UnixNano()) / 1e9},
	}
}

// GaugeConfig tunes a GaugeWorker.
type GaugeConfig struct {
	// Sales lists the sales to watch (those this node has loaded).
	Sales func() []*seckill.Sale
	// Counts reads one sale's counters.
	Counts func(ctx context.Context, saleID string) (Counts, error)
	// Interval between refreshes. Default 30s.
	Interval time.Duration
	// Grace is how long unrecorded units may stay while the database's
	// sold units do not move before the sale is reported unbalanced.
	// Default DefaultInFlightGrace.
	Grace  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// GaugeWorker refreshes every watched sale's counters in the background
// and exports the latest as gauges; a scrape only reads memory. Its
// memory is a few numbers per sale, whatever the sale's size.
type GaugeWorker struct {
	cfg GaugeConfig

	mu     sync.Mutex
	latest map[string][]Gauge
	descs  map[string]*prometheus.Desc
	// progress remembers, per sale, the database's sold units and since
	// when they have not moved while Redis held unrecorded units.
	progress map[string]*progress

	worker startstop.Worker
}

type progress struct {
	sold  int64
	since time.Time
}

var _ prometheus.Collector = (*GaugeWorker)(nil)

// NewGaugeWorker returns a GaugeWorker; register it and call Start.
func NewGaugeWorker(cfg GaugeConfig) *GaugeWorker {
	defaults.Positive(&cfg.Interval, 30*time.Second)
	defaults.Positive(&cfg.Grace, DefaultInFlightGrace)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &GaugeWorker{cfg: cfg, progress: map[string]*progress{}}
}

// Refresh reads every watched sale's counters once.
func (g *GaugeWorker) Refresh(ctx context.Context) {
	fresh := map[string][]Gauge{}
	seen := map[string]bool{}
	for _, s := range g.cfg.Sales() {
		c, balanced, err := g.Read(ctx, s.ID)
		if err != nil {
			if ctx.Err() == nil {
				g.cfg.Logger.Warn("reconciliation counters failed", "sale", s.ID, "err", err)
			}
			continue
		}
		seen[s.ID] = true
		fresh[s.ID] = c.Gauges(balanced)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.latest = fresh
	for id := range g.progress {
		if !seen[id] {
			delete(g.progress, id)
		}
	}
}

// Read reads one sale's counters and reaches the gauges' verdict on them
// (see balanced): what the control room's live feed shows, at the cost of
// a few counters whatever the sale's size.
func (g *GaugeWorker) Read(ctx context.Context, saleID string) (Counts, bool, error) {
	c, err := g.cfg.Counts(ctx, saleID)
	if err != nil {
		return Counts{}, false, err
	}
	return c, g.balanced(c), nil
}

// balanced is the verdict on one sale's counters: nothing oversold, no
// stuck restore, and no unrecorded units that the database has stopped
// catching up with for Grace (a steady stream of orders keeps units in
// flight; a lost one leaves them there once the stream stops).
func (g *GaugeWorker) balanced(c Counts) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.progress[c.SaleID]
	if p == nil || p.sold != c.Sold() || c.Unrecorded() == 0 {
		p = &progress{sold: c.Sold(), since: c.CheckedAt}
		g.progress[c.SaleID] = p
	}
	stuck := c.Unrecorded() > 0 && c.CheckedAt.Sub(p.since) >= g.cfg.Grace
	return c.Oversold() == 0 && c.RestoresAlerted == 0 && !stuck
}

// Start runs Refresh at once, then every Interval, until Stop. A second
// Start, or a Start after Stop, does nothing.
func (g *GaugeWorker) Start(ctx context.Context) {
	g.worker.StartEvery(ctx, g.cfg.Interval, g.Refresh)
}

// Stop ends the refresher. Safe to call twice, and without Start.
func (g *GaugeWorker) Stop(ctx context.Context) error {
	return g.worker.StopNamed(ctx, "reconcile gauges")
}

// Describe sends nothing: an unchecked collector (the gauges appear once
// a sale has been read).
func (g *GaugeWorker) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (g *GaugeWorker) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.descs == nil {
		g.descs = map[string]*prometheus.Desc{}
	}
	for sale, gauges := range g.latest {
		for _, gg := range gauges {
			d, ok := g.descs[gg.Name]
			if !ok {
				d = prometheus.NewDesc(gg.Name, gg.Help, []string{"sale"}, nil)
				g.descs[gg.Name] = d
			}
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, gg.Value, sale)
		}
	}
}
