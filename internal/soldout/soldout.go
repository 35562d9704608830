// Package soldout owns the local sold-out flag of design §7
// (docs/design.md): once the stock store has said a sale is sold out, this
// node answers "sold out" for it without asking again, so the stampede that
// follows a sell-out costs no Redis call.
//
// The flag is a cache of a fact that can stop being true: a restore
// (a cancel, an unpaid order timing out, an operator) brings units back.
// So it is cleared by Clear, which the restore path calls (through Redis
// pub/sub, on every node), and in any case it lapses after a short safety
// interval, so a lost Clear costs at most that long of false "sold out".
package soldout

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// DefaultSafetyInterval is how long a sold-out flag holds without a Clear.
const DefaultSafetyInterval = time.Second

// Config tunes a Gate. Zero values take the defaults.
type Config struct {
	// SafetyInterval is how long a sale stays flagged after the stock
	// store last said it is sold out. Default DefaultSafetyInterval.
	SafetyInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Replays, if set, finds the earlier answer of a keyed request
	// without reserving: OutcomeReplayed or OutcomeKeyReused, as the
	// stock store's idempotency check would answer, or the zero Outcome
	// when the key holds no reservation. With it, keyed requests on a
	// flagged sale are answered locally too (see Gate). In production it
	// is a request combiner over one HMGET of the idempotency hash, so
	// concurrent lookups of a sale share one call.
	Replays seckill.Reserver
}

// Gate is a Reserver in front of another that remembers which sales are
// sold out. It is safe for concurrent use and starts no goroutines.
//
// Two rules keep its answers the ones the stock store would give:
//   - A sale is flagged only when a one-unit request was refused as sold
//     out: a refused two says nothing about one.
//   - A request with an Idempotency-Key may replay the claim of the last
//     unit (design §2), so its earlier answer is looked up (Config.Replays)
//     and given; with none, the script could only refuse it (limit_exceeded
//     too, which the flag answers as sold out anyway), so the Gate answers
//     sold out. Without Replays, or when the lookup fails or a Clear came
//     during it, the request goes to the stock store.
//
// Gate implements prometheus.Collector, exporting its hits and flags.
type Gate struct {
	next     seckill.Reserver
	replays  seckill.Reserver
	interval time.Duration
	now      func() time.Time
	// wallClock: now is time.Now (Config.Now unset), so a caller's own
	// reading of the wall clock will do (AnswerSoldOutAt).
	wallClock bool

	flags sync.Map // sale id -> *flag
	// seen holds every sale ever flagged, so the per-sale gauge reads 0
	// once a flag is cleared instead of vanishing. One entry per sale.
	seen sync.Map // sale id -> struct{}
	// clears counts Clear calls. A request notes it before asking the
	// stock store and flags the sale only if no Clear came meanwhile: a
	// "sold out" read before a restore must not hide the restored units.
	clears atomic.Uint64
	hits   atomic.Uint64
	// replayHits counts keyed requests on a flagged sale answered with
	// their earlier reservation by the lookup alone.
	replayHits atomic.Uint64

	hitsDesc, replayDesc, flagsDesc, flagDesc *prometheus.Desc
}

type flag struct {
	until atomic.Int64 // Unix nanoseconds
}

var _ seckill.Reserver = (*Gate)(nil)

// New returns a Gate in front of next.
func New(next seckill.Reserver, cfg Config) *Gate {
	defaults.Positive(&cfg.SafetyInterval, DefaultSafetyInterval)
	wallClock := cfg.Now == nil
	defaults.Clock(&cfg.Now)
	return &Gate{
		next:      next,
		replays:   cfg.Replays,
		interval:  cfg.SafetyInterval,
		now:       cfg.Now,
		wallClock: wallClock,
		hitsDesc: prometheus.NewDesc("seckill_soldout_local_answers_total",
			"Reservation requests answered sold_out from this node's sold-out flag, without a stock store call.", nil, nil),
		replayDesc: prometheus.NewDesc("seckill_soldout_local_replays_total",
			"Keyed requests on a sale flagged sold out answered with their earlier reservation by an idempotency lookup, without the reserve script.", nil, nil),
		flagsDesc: prometheus.NewDesc("seckill_soldout_flagged_sales",
			"Sales this node currently holds a sold-out flag for.", nil, nil),
		flagDesc: prometheus.NewDesc("seckill_soldout_flag",
			"1 while this node answers the sale sold_out locally, 0 once the flag is cleared or has lapsed.", []string{"sale"}, nil),
	}
}

// Reserve answers a flagged sale locally (a keyed request with its
// earlier answer if it has one), and otherwise asks the next Reserver,
// flagging the sale when a request for one unit comes back sold out.
func (g *Gate) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	clears := g.clears.Load()
	if g.SoldOut(saleID) {
		if req.IdempotencyKey == "" {
			g.hits.Add(1)
			return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
		}
		if res, ok := g.replay(ctx, saleID, req, clears); ok {
			return res, nil
		}
		clears = g.clears.Load()
	}
	res, err := g.next.Reserve(ctx, saleID, req)
	if err == nil && res.Outcome == seckill.OutcomeSoldOut && req.Qty == 1 {
		g.mark(saleID, clears)
	}
	return res, err
}

// AnswerSoldOut reports whether saleID is flagged now, counting it as a
// local answer when it is: for a caller that answers sold out itself,
// before it has decoded the request.
func (g *Gate) AnswerSoldOut(saleID string) bool {
	return g.AnswerSoldOutAt(saleID, time.Time{})
}

// AnswerSoldOutAt is AnswerSoldOut for a caller that has read the wall
// clock already, at now (the reservation route reads it once per request:
// a read costs 150-250 ns on this project's virtual machines). A Gate on
// a clock of its own (Config.Now) reads that one instead, as it does for
// the zero now.
func (g *Gate) AnswerSoldOutAt(saleID string, now time.Time) bool {
	if !g.wallClock {
		now = time.Time{}
	}
	if g.soldOutAt(saleID, now) {
		g.hits.Add(1)
		return true
	}
	return false
}

// replay answers a keyed request on a flagged sale from its earlier
// answer, or sold out when it has none; ok is false when the stock store
// must decide (no lookup configured, the lookup failed, or a Clear came
// while it ran: units may be back).
func (g *Gate) replay(ctx context.Context, saleID string, req seckill.ReserveRequest, clears uint64) (res seckill.ReserveResult, ok bool) {
	if g.replays == nil {
		return res, false
	}
	res, err := g.replays.Reserve(ctx, saleID, req)
	switch {
	case err != nil:
		return res, false
	case res.Outcome == seckill.OutcomeReplayed || res.Outcome == seckill.OutcomeKeyReused:
		g.replayHits.Add(1)
		return res, true
	case res.Outcome != 0 || g.clears.Load() != clears || !g.SoldOut(saleID):
		return res, false
	}
	g.hits.Add(1)
	return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, true
}

// SoldOut reports whether saleID is flagged now.
func (g *Gate) SoldOut(saleID string) bool { return g.soldOutAt(saleID, time.Time{}) }

// soldOutAt reports whether saleID is flagged at now; the zero now is the
// Gate's clock, read only for a sale that has a flag.
func (g *Gate) soldOutAt(saleID string, now time.Time) bool {
	v, ok := g.flags.Load(saleID)
	if !ok {
		return false
	}
	until := v.(*flag).until.Load()
	var left int64
	if now.IsZero() {
		left = until - g.now().UnixNano()
	} else if left = until - now.UnixNano(); left > int64(g.interval) {
		// The caller read the clock before another request flagged the
		// sale again: its time is older than the flag, which says nothing
		// of the clock going back. The clock says.
		left = until - g.now().UnixNano()
	}
	// More than the interval left means the wall clock went back: the
	// flag's age is unknown, so it is not trusted.
	if left > 0 && left <= int64(g.interval) {
		return true
	}
	g.flags.CompareAndDelete(saleID, v)
	return false
}

func (g *Gate) mark(saleID string, clears uint64) {
	until := g.now().Add(g.interval).UnixNano()
	v, ok := g.flags.Load(saleID)
	if !ok {
		v, _ = g.flags.LoadOrStore(saleID, &flag{})
	}
	v.(*flag).until.Store(until)
	g.seen.Store(saleID, struct{}{})
	if g.clears.Load() != clears {
		// A Clear ran while the stock store was deciding: this answer may
		// predate the restore. Losing the flag costs one more call.
		g.flags.CompareAndDelete(saleID, v)
	}
}

// Clear drops the flag of saleID: units came back. The restore path
// calls it on every node when it returns stock to Redis.
func (g *Gate) Clear(saleID string) {
	g.clears.Add(1)
	g.flags.Delete(saleID)
}

// Hits is the number of requests answered sold out from a flag so far,
// keyed ones whose key held no reservation included.
func (g *Gate) Hits() uint64 { return g.hits.Load() }

// ReplayHits is the number of keyed requests on a flagged sale answered
// with their earlier reservation by the lookup.
func (g *Gate) ReplayHits() uint64 { return g.replayHits.Load() }

// Describe implements prometheus.Collector.
func (g *Gate) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.hitsDesc
	ch <- g.replayDesc
	ch <- g.flagsDesc
	ch <- g.flagDesc
}

// Collect implements prometheus.Collector.
func (g *Gate) Collect(ch chan<- prometheus.Metric) {
	flagged := 0
	g.seen.Range(func(k, _ any) bool {
		sale, on := k.(string), 0.0
		if g.SoldOut(sale) {
			flagged++
			on = 1
		}
		ch <- prometheus.MustNewConstMetric(g.flagDesc, prometheus.GaugeValue, on, sale)
		return true
	})
	ch <- prometheus.MustNewConstMetric(g.hitsDesc, prometheus.CounterValue, float64(g.Hits()))
	ch <- prometheus.MustNewConstMetric(g.replayDesc, prometheus.CounterValue, float64(g.ReplayHits()))
	ch <- prometheus.MustNewConstMetric(g.flagsDesc, prometheus.GaugeValue, float64(flagged))
}
