package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill/internal/startstop"
)

// BacklogReader is a broker that can tell how many messages wait in it
// (rabbitmq.Broker and nats.Broker: Backlog).
type BacklogReader interface {
	Backlog(ctx context.Context) (int64, error)
}

// Backlog asks the broker for its backlog once per interval, not
// per scrape or per control-room sample: a passive queue declare or a
// consumer-info request is a round trip to the broker. It exports the last
// sample as seckill_broker_backlog_messages while that sample is fresh;
// while the broker cannot answer the gauge is absent rather than a stale
// number (alert on absent() if that matters).
type Backlog struct {
	broker   BacklogReader
	interval time.Duration
	logger   *slog.Logger
	now      func() time.Time
	desc     *prometheus.Desc
	w        startstop.Worker

	mu     sync.Mutex
	value  int64
	at     time.Time // of the last good sample; zero: none
	failed bool      // the last sample failed (logged once per outage)
}

// NewBacklog returns the sampler of b; Start begins sampling.
func NewBacklog(b BacklogReader, interval time.Duration, logger *slog.Logger, now func() time.Time) *Backlog {
	return &Backlog{
		broker: b, interval: interval, logger: logger, now: now,
		desc: prometheus.NewDesc("seckill_broker_backlog_messages",
			"Messages waiting in the broker for the order writer (RabbitMQ: ready on the work and retry queues; NATS: the work consumer's pending and unacknowledged), sampled every --broker-backlog-interval. Each message is one relay batch of reservation events.",
			nil, nil),
	}
}

// Start samples at once and then every interval until Stop.
func (s *Backlog) Start(ctx context.Context) {
	s.w.Start(ctx, func(ctx context.Context) {
		s.sample(ctx)
		startstop.Every(ctx, s.interval, nil, s.sample)
	})
}

// Stop ends the sampling. Safe to call twice.
func (s *Backlog) Stop(ctx context.Context) error { return s.w.Stop(ctx) }

func (s *Backlog) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.interval, time.Second))
	defer cancel()
	n, err := s.broker.Backlog(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if !s.failed && ctx.Err() == nil {
			s.logger.Warn("broker backlog: cannot read", "err", err)
		}
		s.failed = true
		return
	}
	s.value, s.at, s.failed = n, s.now(), false
}

// Last is the latest sample, if it is fresh (at most three intervals old).
func (s *Backlog) Last() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || s.now().Sub(s.at) > 3*s.interval {
		return 0, false
	}
	return s.value, true
}

func (s *Backlog) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *Backlog) Collect(ch chan<- prometheus.Metric) {
	if n, ok := s.Last(); ok {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n))
	}
}
