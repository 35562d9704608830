package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/ttlcache"
	"github.com/seckill-dev/seckill/internal/web"
)

// snapshotTTL is how long one reconciliation serves the control room: it
// reads a sale's whole ledger, too much to do twice a second.
const snapshotTTL = 2 * time.Second

// controlRoom builds the control room's view of a sale's pipeline: one
// (cached) reconciliation gives the outbox, the orders, the failed orders,
// the parked restores and the verdict; the reservation counters come from
// this node's metrics.
type controlRoom struct {
	m   *Main
	reg prometheus.Gatherer
	// backlog is the broker's sampled queue depth; nil on a node without
	// a broker.
	backlog *backlogSampler
	// recent keeps each sale's reconciliation for snapshotTTL.
	recent *ttlcache.Cache[*reconcile.Report]
}

func (c *controlRoom) report(ctx context.Context, saleID string) (*reconcile.Report, error) {
	now := c.m.now()
	if rep, _, ok := c.recent.Get(saleID, now); ok {
		return rep, nil
	}
	rep, err := reconcile.Reconcile(ctx, saleID, c.m.orders, c.m.stock, now, reconcile.Options{})
	if err != nil {
		return nil, err
	}
	c.recent.Put(saleID, rep, now.Add(snapshotTTL), now)
	return rep, nil
}

func (c *controlRoom) snapshot(ctx context.Context, saleID string) (web.Snapshot, error) {
	s := web.EmptySnapshot()
	rep, err := c.report(ctx, saleID)
	if err != nil {
		return s, err
	}
	s.OutboxLen = rep.InFlight.OutboxLen
	s.OrdersPersisted = rep.Orders.Ordered.Count + rep.Orders.Paid.Count + rep.Orders.Cancelled.Count
	s.FailedOrders = rep.FailedOrders.Count
	s.ParkedRestores = rep.Restores.Parked
	state := "balanced"
	switch {
	case rep.Oversold > 0:
		state = "oversold"
	case !rep.Balanced:
		state = "unbalanced"
	}
	s.Reconciliation = web.Reconciliation{State: state, Oversold: rep.Oversold, Undersold: rep.Undersold, CheckedAt: rep.CheckedAt}
	if c.backlog != nil {
		if n, ok := c.backlog.last(); ok {
			s.BrokerBacklog = n
		}
	}
	s.Reservations = c.reservationCounts()
	s.ReservationsNodeWide = true
	return s, nil
}

// reservationCounts reads seckill_reservations_total by outcome.
func (c *controlRoom) reservationCounts() map[string]int64 {
	counts := map[string]int64{}
	families, err := c.reg.Gather()
	if err != nil {
		return counts
	}
	for _, f := range families {
		if f.GetName() != "seckill_reservations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] = int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return counts
}
