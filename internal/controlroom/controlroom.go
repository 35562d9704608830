// Package controlroom builds the control room's live view of a sale's
// pipeline (internal/web draws it): the outbox, the units in orders, the
// failed orders, the parked restores and the verdict come from the sale's
// counters, judged as the seckill_reconcile_* gauges judge them
// (reconcile.GaugeWorker.Read); the reservation counters from this node's
// metrics; the broker's backlog from its sampler. The
// reservation-by-reservation comparison, which costs the sale's size, runs
// only when the operator asks (Reconcile now: the reconciliation route).
package controlroom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/ttlcache"
	"github.com/seckill-dev/seckill/internal/web"
)

// snapshotTTL is how long one reading of a sale's counters serves the
// control room: cheap (a few counters whatever the sale's size), but
// read at most once per interval however many operators watch.
const snapshotTTL = 2 * time.Second

// Config holds the Room's sources; Gauges and Gatherer are required.
type Config struct {
	// Gauges reads and judges a sale's counters.
	Gauges *reconcile.GaugeWorker
	// Gatherer is this node's registry, for seckill_reservations_total.
	Gatherer prometheus.Gatherer
	// Backlog is the broker's sampled queue depth; nil on a node without
	// a broker.
	Backlog *metrics.Backlog
	// Lottery and Draws read lottery sales, Queue queue sales; nil: their
	// panels show n/a.
	Lottery LotteryReader
	Draws   DrawReader
	Queue   QueueReader
	// Archive, if set, reads an ended lottery whose keys the archiver has
	// dropped; nil: it shows no entrants.
	Archive LotteryArchive
	// Pace is how far a queue sale's admission has got
	// (internal/admitpace); nil: its fixed admit_per_second.
	Pace func(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error)
	Now  func() time.Time
}

// Room answers the control room's snapshots of a sale.
type Room struct {
	cfg Config
	// recent keeps each sale's counters for snapshotTTL.
	recent *ttlcache.Cache[judged]
	// recentAdmission keeps each sale's admission for snapshotTTL.
	recentAdmission *ttlcache.Cache[web.AdmissionSnapshot]
	orders          drawOrders
}

// New returns the Room of cfg.
func New(cfg Config) *Room {
	defaults.Clock(&cfg.Now)
	return &Room{cfg: cfg, recent: ttlcache.New[judged](1, 1000), recentAdmission: ttlcache.New[web.AdmissionSnapshot](1, 1000)}
}

// judged is one reading of a sale's counters and the verdict on them.
type judged struct {
	reconcile.Counts
	balanced bool
}

func (r *Room) counts(ctx context.Context, saleID string) (judged, error) {
	now := r.cfg.Now()
	if j, _, ok := r.recent.Get(saleID, now); ok {
		return j, nil
	}
	counts, balanced, err := r.cfg.Gauges.Read(ctx, saleID)
	if err != nil {
		return judged{}, err
	}
	j := judged{counts, balanced}
	r.recent.Put(saleID, j, now.Add(snapshotTTL), now)
	return j, nil
}

// Snapshot is the sale's view now (web.Config.Snapshot).
func (r *Room) Snapshot(ctx context.Context, saleID string) (web.Snapshot, error) {
	s := web.EmptySnapshot()
	j, err := r.counts(ctx, saleID)
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
	if r.cfg.Backlog != nil {
		if n, ok := r.cfg.Backlog.Last(); ok {
			s.BrokerBacklog = n
		}
	}
	s.Reservations = r.reservationCounts()
	s.ReservationsNodeWide = true
	return s, nil
}

// reservationCounts reads seckill_reservations_total by outcome.
func (r *Room) reservationCounts() map[string]int64 {
	counts := map[string]int64{}
	families, err := r.cfg.Gatherer.Gather()
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
