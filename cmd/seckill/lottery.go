package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/lottery"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// startLottery starts the lottery's draw worker and returns the API's
// side of lotteries: entries batched per sale like claims, results, the
// draw. Every node runs the worker; the draw's lease in the database
// lets one at a time work on a sale.
func (m *Main) startLottery(ctx context.Context, w *wired) *httpapi.LotteryConfig {
	cfg := &m.Config
	draws := sqlstore.NewDrawStore(m.db)
	enterer := combiner.NewEnterer(m.stock.Lottery(), combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: cfg.RequestBudget})
	m.closers = append(m.closers, enterer.Stop)

	drawn := prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_lottery_draws_total", Help: "Lottery draws this node finished."})
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_lottery_draw_duration_seconds",
		Help: "How long a draw took, from closing the entries to recording the winners.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)})
	entrants := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_lottery_entrants",
		Help: "Entrants of each drawn lottery sale, as its draw counted them."}, []string{"sale_id"})
	w.reg.MustRegister(drawn, took, entrants)

	claimIDs := claimid.NewMinter(jwt.DeriveKey([]byte(cfg.JWTSecret), "seckill reservation ids v1"))
	host, _ := os.Hostname()
	m.start(ctx, lottery.New(lottery.Config{
		Draws: draws, Sales: w.sales, Entries: m.stock.Lottery(), Stock: m.stock.StockStore(),
		Owner:    fmt.Sprintf("%s/%d/%s", host, os.Getpid(), seckill.NewEntryID()[1:9]),
		Interval: cfg.DrawInterval, Lease: cfg.DrawLease, Batch: cfg.DrawBatch, Pace: cfg.DrawPace,
		NewID: claimIDs.New, Now: m.now, Logger: m.Logger,
		OnDraw: func(saleID string, n, _ int, d time.Duration) {
			drawn.Inc()
			took.Observe(d.Seconds())
			entrants.WithLabelValues(saleID).Set(float64(n))
		},
	}))
	return &httpapi.LotteryConfig{Enterer: enterer, Store: m.stock.Lottery(), Draws: draws}
}
