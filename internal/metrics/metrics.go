// Package metrics holds the engine's own Prometheus collectors: the
// pipeline counters the wiring feeds from the workers' hooks, the
// durability counters, the stock levels read at scrape time and the
// broker's backlog, sampled (Backlog). Every
// other package registers its collectors itself, on the same registry.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// Pipeline are the counters of the pipeline that the wiring observes
// through the workers' hooks; each package registers its own collectors on
// the same registry.
type Pipeline struct {
	batchSize     prometheus.Histogram
	batchDuration prometheus.Histogram
	batchErrors   prometheus.Counter
	persisted     *prometheus.CounterVec
	failedOrders  prometheus.Counter
	relayed       prometheus.Counter
	takeovers     prometheus.Counter
	reclaimed     prometheus.Counter
	timedOut      prometheus.Counter
	restoreAlerts prometheus.Counter
	foreign       *prometheus.CounterVec
}

// NewPipeline registers the pipeline's collectors on reg.
func NewPipeline(reg prometheus.Registerer) *Pipeline {
	m := &Pipeline{
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_reserve_batch_size",
			Help:    "Reservation requests per stock-store script call (the combiner's batches).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_reserve_batch_duration_seconds",
			Help:    "Duration of one stock-store script call.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
		batchErrors: counter("seckill_reserve_batch_errors_total",
			"Stock-store script calls that failed (every request in the batch got an error)."),
		persisted: counterVec("seckill_orders_persisted_total",
			"Reservation events the order writer decided, by result (created, duplicate, rejected).", "result"),
		failedOrders: counter("seckill_failed_orders_total",
			"Claimed reservations recorded in failed_orders: each one needs an operator (alert on any increase)."),
		relayed: counter("seckill_outbox_relayed_total",
			"Reservations of the outbox published to the broker and confirmed."),
		takeovers: counter("seckill_relay_takeovers_total",
			"Times this node's relay took over outbox entries another relay (a dead or stuck node) left unacknowledged."),
		reclaimed: counter("seckill_relay_reclaimed_entries_total",
			"Reservations of outbox entries this node's relay took over from another relay and published again."),
		timedOut: counter("seckill_orders_timed_out_total",
			"Orders cancelled because they were not paid in time."),
		restoreAlerts: counter("seckill_restore_alerts_total",
			"Restores still waiting for their order after --restore-alert-after: each needs an operator."),
		foreign: counterVec("seckill_foreign_events_total",
			"Reservation events of another deployment's namespace that the order writer found on its queue and left for their owner (two deployments share a queue: give each its own --broker-queue).", "namespace"),
	}
	reg.MustRegister(m.batchSize, m.batchDuration, m.batchErrors, m.persisted, m.failedOrders, m.relayed, m.takeovers, m.reclaimed, m.timedOut, m.restoreAlerts, m.foreign)
	return m
}

func (m *Pipeline) ObservePersisted(created, duplicate, rejected int) {
	m.persisted.WithLabelValues("created").Add(float64(created))
	m.persisted.WithLabelValues("duplicate").Add(float64(duplicate))
	m.persisted.WithLabelValues("rejected").Add(float64(rejected))
}

func (m *Pipeline) ObserveFailed(*seckill.FailedOrder) { m.failedOrders.Inc() }
func (m *Pipeline) ObserveForeign(ns string, n int) {
	m.foreign.WithLabelValues(ns).Add(float64(n))
}
func (m *Pipeline) ObserveRelayed(n int)                        { m.relayed.Add(float64(n)) }
func (m *Pipeline) ObserveTimeouts(n int)                       { m.timedOut.Add(float64(n)) }
func (m *Pipeline) ObserveRestoreAlert(*seckill.RestoreRequest) { m.restoreAlerts.Inc() }

func (m *Pipeline) ObserveReclaimed(_ string, n int) {
	m.takeovers.Inc()
	m.reclaimed.Add(float64(n))
}

func (m *Pipeline) ObserveBatch(size int, took time.Duration, err error) {
	m.batchSize.Observe(float64(size))
	m.batchDuration.Observe(took.Seconds())
	if err != nil {
		m.batchErrors.Inc()
	}
}

// counter is a counter of its name and help alone, as most of the
// engine's are.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// StockCollector reports the remaining stock of every sale this node has
// loaded, read from the stock store at scrape time.
type StockCollector struct {
	sales interface{ Loaded() []*seckill.Sale }
	stock interface {
		Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
	}
	remaining *prometheus.Desc
	reserved  *prometheus.Desc
}

// NewStockCollector reads sales' levels from stock at each scrape.
func NewStockCollector(sales interface{ Loaded() []*seckill.Sale }, stock interface {
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
}) *StockCollector {
	return &StockCollector{
		sales:     sales,
		stock:     stock,
		remaining: prometheus.NewDesc("seckill_stock_remaining", "Units still available in the stock store.", []string{"sale"}, nil),
		reserved:  prometheus.NewDesc("seckill_stock_reserved", "Units reserved in the stock store.", []string{"sale"}, nil),
	}
}

func (c *StockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.remaining
	ch <- c.reserved
}

func (c *StockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range c.sales.Loaded() {
		lvl, err := c.stock.Stock(ctx, s.ID)
		if err != nil {
			continue // a scrape must not fail because one sale is unreadable
		}
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(lvl.Remaining()), s.ID)
		ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(lvl.Reserved), s.ID)
	}
}

// Durability counts what the engine did about Redis losing writes
// it had acknowledged.
type Durability struct {
	LostClaims prometheus.Counter
	NotDurable prometheus.Counter
	Heals      prometheus.Counter
}

// NewDurability registers the durability counters on reg.
func NewDurability(reg prometheus.Registerer) *Durability {
	m := &Durability{
		LostClaims: counter("seckill_lost_claims_total",
			"Claimed reservations the stock store forgot and the database never got, recorded failed (lost_in_stock_store): alert on any increase."),
		Heals: counter("seckill_stock_store_heals_total",
			"Sales rebuilt from the database after Redis lost acknowledged writes (each also logged ALERT)."),
		NotDurable: counter("seckill_reserve_batches_not_durable_total",
			"Reservation batches fewer replicas acknowledged than --redis-durability replicas:N asks (their buyers got 503 try_later)."),
	}
	reg.MustRegister(m.LostClaims, m.NotDurable, m.Heals)
	return m
}
