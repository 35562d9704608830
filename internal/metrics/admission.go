package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// AdmissionCollector reports the lottery and queue sales this node has
// loaded, read from the stock store (and a lottery's draw record) at
// scrape time: entrants, queue length, positions admitted, the admission
// rate and how long a due draw has waited.
type AdmissionCollector struct {
	cfg AdmissionConfig

	entrants, queueLength, admitted, rate, drawWaiting *prometheus.Desc
}

// AdmissionConfig wires an AdmissionCollector. Sales is required; a sale
// whose mode has no reader is left out.
type AdmissionConfig struct {
	Sales interface{ Loaded() []*seckill.Sale }
	// Entrants counts a lottery sale's entries (internal/redis.Lottery).
	Entrants interface {
		EntrantCount(ctx context.Context, saleID string) (int64, error)
	}
	// Queue counts the places in a queue sale's waiting room
	// (internal/redis.Queue).
	Queue interface {
		Length(ctx context.Context, saleID string) (int64, error)
	}
	// Draws reads a lottery's draw record (internal/sqlstore.DrawStore).
	Draws interface {
		EnsureDraw(ctx context.Context, saleID string) (seckill.DrawRecord, error)
	}
	// Pace is how far a queue sale's admission has got. Default: its
	// fixed admit_per_second from the start (seckill.FixedQueuePace).
	Pace func(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error)
	Now  func() time.Time
}

// NewAdmissionCollector returns the collector of cfg.
func NewAdmissionCollector(cfg AdmissionConfig) *AdmissionCollector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Pace == nil {
		cfg.Pace = func(_ context.Context, s *seckill.Sale) (seckill.QueuePace, error) {
			return seckill.FixedQueuePace(s), nil
		}
	}
	sale := []string{"sale"}
	return &AdmissionCollector{
		cfg: cfg,
		entrants: prometheus.NewDesc("seckill_lottery_entrants",
			"Entries of each lottery sale (one a buyer), from the stock store.", sale, nil),
		drawWaiting: prometheus.NewDesc("seckill_lottery_draw_waiting_seconds",
			"How long a lottery sale's draw has been due (entries closed) without finishing; 0 before its close and once drawn.", sale, nil),
		queueLength: prometheus.NewDesc("seckill_queue_length",
			"Buyers holding a place in each queue sale's waiting room.", sale, nil),
		admitted: prometheus.NewDesc("seckill_queue_admitted_total",
			"Places of each queue sale's waiting room admitted so far (at most its length): rate() is the admissions a second.", sale, nil),
		rate: prometheus.NewDesc("seckill_queue_admit_rate",
			"Positions a second each queue sale admits now (its admit_per_second, or the adapted rate).", sale, nil),
	}
}

func (c *AdmissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.entrants, c.drawWaiting, c.queueLength, c.admitted, c.rate} {
		ch <- d
	}
}

// Collect leaves out a sale it cannot read: a scrape must not fail
// because one sale is unreadable.
func (c *AdmissionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	now := c.cfg.Now()
	for _, s := range c.cfg.Sales.Loaded() {
		switch s.Admission.Of() {
		case seckill.AdmitLottery:
			c.collectLottery(ctx, ch, s, now)
		case seckill.AdmitQueue:
			c.collectQueue(ctx, ch, s, now)
		}
	}
}

func (c *AdmissionCollector) collectLottery(ctx context.Context, ch chan<- prometheus.Metric, s *seckill.Sale, now time.Time) {
	if c.cfg.Entrants != nil {
		if n, err := c.cfg.Entrants.EntrantCount(ctx, s.ID); err == nil {
			ch <- prometheus.MustNewConstMetric(c.entrants, prometheus.GaugeValue, float64(n), s.ID)
		}
	}
	if c.cfg.Draws != nil {
		if rec, err := c.cfg.Draws.EnsureDraw(ctx, s.ID); err == nil {
			waiting := seckill.DrawWaiting(s, rec.Drawn(), now)
			ch <- prometheus.MustNewConstMetric(c.drawWaiting, prometheus.GaugeValue, waiting.Seconds(), s.ID)
		}
	}
}

func (c *AdmissionCollector) collectQueue(ctx context.Context, ch chan<- prometheus.Metric, s *seckill.Sale, now time.Time) {
	if c.cfg.Queue == nil {
		return
	}
	n, err := c.cfg.Queue.Length(ctx, s.ID)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.queueLength, prometheus.GaugeValue, float64(n), s.ID)
	pace, err := c.cfg.Pace(ctx, s)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(min(pace.AdmittedAt(now), n)), s.ID)
	var rate int64
	if !now.Before(s.StartAt) {
		rate = pace.Rate
	}
	ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(rate), s.ID)
}

// Draws counts the lottery draws this node finished and how long each
// took.
type Draws struct {
	drawn    prometheus.Counter
	duration prometheus.Histogram
}

// NewDraws registers the draws' collectors on reg.
func NewDraws(reg prometheus.Registerer) *Draws {
	m := &Draws{
		drawn: counter("seckill_lottery_draws_total", "Lottery draws this node finished."),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_lottery_draw_duration_seconds",
			Help:    "How long a draw took, from closing the entries to recording the winners.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
	reg.MustRegister(m.drawn, m.duration)
	return m
}

// ObserveDraw is internal/lottery's Config.OnDraw.
func (m *Draws) ObserveDraw(_ string, _, _ int, took time.Duration) {
	m.drawn.Inc()
	m.duration.Observe(took.Seconds())
}
