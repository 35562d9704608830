package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/reconcile"
)

// reconcileGauges reconciles every sale this node has loaded in the
// background and exports the latest numbers of each as gauges. A scrape
// only reads memory: reconciling reads a sale's whole ledger.
type reconcileGauges struct {
	sales     interface{ Loaded() []*seckill.Sale }
	reconcile func(ctx context.Context, saleID string) (*reconcile.Report, error)
	interval  time.Duration
	logger    *slog.Logger

	mu     sync.Mutex
	latest map[string][]reconcile.Gauge
	descs  map[string]*prometheus.Desc

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

func (g *reconcileGauges) refresh(ctx context.Context) {
	fresh := map[string][]reconcile.Gauge{}
	for _, s := range g.sales.Loaded() {
		rep, err := g.reconcile(ctx, s.ID)
		if err != nil {
			if ctx.Err() == nil {
				g.logger.Warn("reconciliation for metrics failed", "sale", s.ID, "err", err)
			}
			continue
		}
		fresh[s.ID] = rep.Gauges()
	}
	g.mu.Lock()
	g.latest = fresh
	g.mu.Unlock()
}

func (g *reconcileGauges) Start(ctx context.Context) {
	ctx, g.cancel = context.WithCancel(ctx)
	g.done = make(chan struct{})
	go func() {
		defer close(g.done)
		t := time.NewTicker(g.interval)
		defer t.Stop()
		for {
			g.refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the refresher. Safe to call twice, and without Start.
func (g *reconcileGauges) Stop(ctx context.Context) error {
	g.stopOnce.Do(func() {
		if g.cancel != nil {
			g.cancel()
		}
	})
	if g.done == nil {
		return nil
	}
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reconcile gauges: stop: %w", ctx.Err())
	}
}

// Describe sends nothing: the gauges' names are known only once a sale is
// reconciled, so this is an unchecked collector.
func (g *reconcileGauges) Describe(chan<- *prometheus.Desc) {}

func (g *reconcileGauges) Collect(ch chan<- prometheus.Metric) {
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
