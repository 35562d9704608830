package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/ttlcache"
	"github.com/seckill-dev/seckill/internal/web"
)

// snapshotTTL is how long one reading of a sale's counters serves the
// control room: cheap (a few counters whatever the sale's size), but
// read at most once per interval however many operators watch.
const snapshotTTL = 2 * time.Second

// controlRoom builds the control room's live view of a sale's pipeline:
// the outbox, the units in orders, the failed orders, the parked restores
// and the verdict come from the sale's counters, judged as the
// seckill_reconcile_* gauges judge them (reconcile.GaugeWorker.Read); the
// reservation counters from this node's metrics. The
// reservation-by-reservation comparison, which costs the sale's size, runs
// only when the operator asks (Reconcile now: the reconciliation route).
type controlRoom struct {
	m   *Main
	reg prometheus.Gatherer
	// backlog is the broker's sampled queue depth; nil on a node without
	// a broker.
	backlog *metrics.Backlog
	gauges  *reconcile.GaugeWorker
	// recent keeps each sale's counters for snapshotTTL.
	recent *ttlcache.Cache[judged]
}

// judged is one reading of a sale's counters and the verdict on them.
type judged struct {
	reconcile.Counts
	balanced bool
}

func (c *controlRoom) counts(ctx context.Context, saleID string) (judged, error) {
	now := c.m.now()
	if j, _, ok := c.recent.Get(saleID, now); ok {
		return j, nil
	}
	counts, balanced, err := c.gauges.Read(ctx, saleID)
	if err != nil {
		return judged{}, err
	}
	j := judged{counts, balanced}
	c.recent.Put(saleID, j, now.Add(snapshotTTL), now)
	return j, nil
}

func (c *controlRoom) snapshot(ctx context.Context, saleID string) (web.Snapshot, error) {
	s := web.EmptySnapshot()
	j, err := c.counts(ctx, saleID)
	if err != nil {
		return s, err
	}
	s.OutboxLen = j.OutboxLen
	s.OrdersPersisted = j.Sold()
	s.FailedOrders = j.FailedOrders
	s.ParkedRestores = j.RestoresParked
	state := "balanced"
	switch {
	case j.Oversold() > 0:
		state = "oversold"
	case !j.balanced:
		state = "unbalanced"
	}
	s.Reconciliation = web.Reconciliation{State: state, Oversold: j.Oversold(), CheckedAt: j.CheckedAt}
	if !j.balanced {
		// Units Redis holds that the database stopped catching up with
		// (in flight while it still does).
		s.Reconciliation.Undersold = j.Unrecorded()
	}
	if c.backlog != nil {
		if n, ok := c.backlog.Last(); ok {
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
