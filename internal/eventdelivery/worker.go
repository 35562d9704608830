// Package eventdelivery owns the delivery of order events from the
// database's event outbox to the shop's sinks (a webhook, a broker):
// claiming due events under a lease, delivering each order's events one
// at a time and in order, and recording what became of each attempt by
// its Policy (retry later, or dead-letter and alert).
package eventdelivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Sink takes one event; nil means it has it.
type Sink interface {
	Deliver(ctx context.Context, e seckill.OrderEvent) error
}

// Config configures a Worker. Outbox, Sink and Owner are required.
type Config struct {
	Outbox Outbox
	Sink   Sink
	// Owner names this deliverer in its leases: unique per process.
	Owner  string
	Policy Policy
	// Lease is how long a claim holds its events; a delivery is cut off
	// a second before its lease ends, so no other deliverer can take an
	// event while this one may still be sending it. Default 1m.
	Lease time.Duration
	// Timeout bounds one delivery. Default 10s.
	Timeout time.Duration
	// Batch is the most events claimed at once; Concurrency the most in
	// flight. Defaults 100 and 16.
	Batch, Concurrency int
	// Poll is the pause after a pass that found nothing due. Default 200ms.
	Poll time.Duration
	// Currency stands in for an event's empty one (a sale made before
	// sales had a currency).
	Currency string
	// Registerer takes the worker's metrics when set.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
	// Jitter returns a number in [0, 1); rand.Float64 when nil.
	Jitter func() float64
}

// Worker delivers the outbox's events until stopped.
type Worker struct {
	cfg  Config
	m    *workerMetrics
	wake chan struct{}
	svc  startstop.Worker
}

// New checks cfg, fills its defaults and returns its worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Outbox == nil || cfg.Sink == nil || cfg.Owner == "" {
		return nil, errors.New("event delivery: need an outbox, a sink and an owner")
	}
	if cfg.Policy == (Policy{}) {
		cfg.Policy = DefaultPolicy
	}
	if cfg.Policy.FirstBackoff <= 0 || cfg.Policy.MaxBackoff < cfg.Policy.FirstBackoff || cfg.Policy.RetryFor <= 0 {
		return nil, fmt.Errorf("event delivery: policy %+v: want 0 < first backoff <= max backoff and a positive retry window", cfg.Policy)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Lease, time.Minute)
	def(&cfg.Timeout, 10*time.Second)
	def(&cfg.Poll, 200*time.Millisecond)
	if cfg.Lease < cfg.Timeout+2*time.Second {
		return nil, fmt.Errorf("event delivery: lease %s must exceed the delivery timeout %s by 2s", cfg.Lease, cfg.Timeout)
	}
	if cfg.Batch < 1 {
		cfg.Batch = 100
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 16
	}
	defaultHooks(&cfg.Logger, &cfg.Now, &cfg.Jitter)
	return &Worker{cfg: cfg, m: newWorkerMetrics(cfg.Registerer), wake: make(chan struct{}, 1)}, nil
}

// defaultHooks fills the logger, clock and jitter a config left nil: no
// logs, the wall clock, rand.Float64.
func defaultHooks(logger **slog.Logger, now *func() time.Time, jitter *func() float64) {
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	if *now == nil {
		*now = time.Now
	}
	if *jitter == nil {
		*jitter = rand.Float64
	}
}

// Start runs the worker until Stop.
func (w *Worker) Start(ctx context.Context) { w.svc.Start(ctx, w.run) }

// Stop stops the worker and waits for its deliveries in flight, at most
// until ctx ends. Safe to call twice.
func (w *Worker) Stop(ctx context.Context) error { return w.svc.Stop(ctx) }

// Wake makes an idle worker look for events now (an order change just
// committed one).
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := w.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("order events: claim failed", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		t := time.NewTimer(w.cfg.Poll)
		select {
		case <-ctx.Done():
		case <-w.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Pass claims one batch of due events, delivers them and records the
// outcomes; it returns how many it claimed.
func (w *Worker) Pass(ctx context.Context) (int, error) {
	claimedAt := w.cfg.Now()
	ds, err := w.cfg.Outbox.Claim(ctx, w.cfg.Owner, claimedAt, w.cfg.Lease, w.cfg.Batch)
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	// No delivery outlives the lease: past it, another deliverer may
	// claim the event.
	deadline := claimedAt.Add(w.cfg.Lease - time.Second)
	var (
		mu        sync.Mutex
		delivered []int64
		wg        sync.WaitGroup
		sem       = make(chan struct{}, w.cfg.Concurrency)
	)
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if w.deliver(ctx, d, deadline) {
				mu.Lock()
				delivered = append(delivered, d.Seq)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(delivered) > 0 {
		// Recorded even when ctx is done: the shop has these events.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := w.cfg.Outbox.Delivered(rctx, delivered, w.cfg.Now()); err != nil {
			// They will be delivered again: duplicates, never losses.
			return len(ds), fmt.Errorf("record deliveries: %w", err)
		}
	}
	return len(ds), nil
}

// deliver makes one attempt at d and, when it fails, records what comes
// next. It reports whether the sink took the event.
func (w *Worker) deliver(ctx context.Context, d *seckill.EventDelivery, deadline time.Time) bool {
	e := d.Event
	if e.Currency == "" {
		e.Currency = w.cfg.Currency
	}
	if until := w.cfg.Now().Add(w.cfg.Timeout); until.Before(deadline) {
		deadline = until
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	err := w.cfg.Sink.Deliver(dctx, e)
	cancel()
	now := w.cfg.Now()
	if err == nil {
		w.m.attempts.WithLabelValues("delivered").Inc()
		w.m.lag.Observe(now.Sub(e.At).Seconds())
		return true
	}
	if ctx.Err() != nil {
		return false // stopping: the lease runs out and the event is claimed again
	}
	w.m.attempts.WithLabelValues("failed").Inc()
	next, dead := w.cfg.Policy.AfterFailure(d.Attempts, d.RetryFrom, now, w.cfg.Jitter())
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	recorded, rerr := w.cfg.Outbox.Failed(rctx, d.Seq, w.cfg.Owner, err.Error(), next, dead, now)
	switch {
	case rerr != nil:
		w.cfg.Logger.Warn("order events: could not record a failed delivery; its lease will run out and it is tried again",
			"event", e.ID, "err", rerr)
	case dead && recorded:
		w.m.dead.Inc()
		w.cfg.Logger.Error("ALERT order event dead-lettered: every delivery failed; redeliver it from the control room once the receiver is fixed",
			"event", e.ID, "type", e.Type, "order", e.OrderID, "attempts", d.Attempts, "since", d.RetryFrom, "err", err)
	default:
		w.cfg.Logger.Debug("order events: delivery failed", "event", e.ID, "attempt", d.Attempts, "next", next, "err", err)
	}
	return false
}

type workerMetrics struct {
	attempts *prometheus.CounterVec
	dead     prometheus.Counter
	lag      prometheus.Histogram
}

func newWorkerMetrics(reg prometheus.Registerer) *workerMetrics {
	m := &workerMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_order_event_attempts_total",
			Help: "Deliveries of order events to the shop attempted by this node, by result (delivered, failed).",
		}, []string{"result"}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_order_event_dead_letters_total",
			Help: "Order events this node dead-lettered after their last attempt failed: each needs an operator (alert on any increase).",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_order_event_delivery_lag_seconds",
			Help:    "Time from an order change to its event's delivery to the shop.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.dead, m.lag)
	}
	return m
}

// StatsCollector exports the outbox's state at scrape time: events
// waiting, the age of the oldest (the delivery lag the shop sees now),
// and the dead letters. Two indexed counts per scrape.
type StatsCollector struct {
	read                  func(ctx context.Context) (seckill.OutboxStats, error)
	now                   func() time.Time
	pending, oldest, dead *prometheus.Desc
}

// NewStatsCollector reads the stats with read at each scrape.
func NewStatsCollector(read func(ctx context.Context) (seckill.OutboxStats, error), now func() time.Time) *StatsCollector {
	return &StatsCollector{
		read: read, now: now,
		pending: prometheus.NewDesc("seckill_order_events_pending", "Order events not delivered to the shop yet (dead letters not counted).", nil, nil),
		oldest: prometheus.NewDesc("seckill_order_events_oldest_pending_seconds",
			"Age of the oldest order event not delivered yet: the shop is this far behind (0 when none).", nil, nil),
		dead: prometheus.NewDesc("seckill_order_events_dead", "Order events dead-lettered and not redelivered: each needs an operator.", nil, nil),
	}
}

func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.oldest
	ch <- c.dead
}

func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(c.now().Sub(st.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.Dead))
}
