package main

import (
	"context"
	"fmt"
	"os"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/lottery"
	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/repeats"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// startLottery starts the lottery's draw worker and returns the API's
// side of lotteries: entries batched per sale like claims, results, the
// draw. Every node runs the worker; the draw's lease in the database
// lets one at a time work on a sale.
func (m *Main) startLottery(ctx context.Context, w *wired) *httpapi.LotteryConfig {
	cfg := &m.Config
	drawStore := sqlstore.NewDrawStore(m.db)
	// An entry is answered once the database keeps it (lottery.Book).
	// Each of its two batched stages may take the entry route's budget;
	// the draw waits two of them after closing the entries.
	entryBudget := httpapi.RouteBudget("enter", w.routeBudgets, cfg.RequestBudget)
	batched := combiner.NewEnterer(m.stock.Lottery(), w.entries, combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: entryBudget})
	m.closers = append(m.closers, batched.Stop)
	// A buyer's repeated entry is answered from memory: the same entry.
	enterer := repeats.NewEnterer(batched, repeats.Config{Now: m.requestClock()})

	draws := metrics.NewDraws(w.reg)

	claimIDs := claimid.NewMinter(jwt.DeriveKey([]byte(cfg.JWTSecret), "seckill reservation ids v1"))
	host, _ := os.Hostname()
	m.start(ctx, lottery.New(lottery.Config{
		Draws: drawStore, Sales: w.sales, Entries: m.stock.Lottery(), Stock: m.stock.StockStore(), Book: w.entries,
		Owner:    fmt.Sprintf("%s/%d/%s", host, os.Getpid(), seckill.NewEntryID()[1:9]),
		Interval: cfg.DrawInterval, Lease: cfg.DrawLease, Batch: cfg.DrawBatch, Pace: cfg.DrawPace,
		EntryBudget: entryBudget, NewID: claimIDs.New, Now: m.now, Logger: m.Logger,
		OnDraw: draws.ObserveDraw,
	}))
	return &httpapi.LotteryConfig{Enterer: enterer, Store: m.stock.Lottery(), Draws: drawStore, Copy: sqlstore.NewEntryStore(m.db), Ready: m.stock.Readiness()}
}
