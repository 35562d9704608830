package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// TestPayTimeoutRestoresInBatches: 20,000 orders nobody pays all expire
// at once; the sweeper gives every unit back, in batches (one restock
// announcement per sale per batch, so a few dozen, not 20,000), and the
// sale reconciles. The time from the deadline to the last unit back in
// Redis must be within 10 s plus one sweep interval (the sweeper may have
// just run when the deadline passed) on a machine that is not
// overloaded; on one whose load average is above its CPU count the time
// is logged, not asserted, and the bound rests on the work per batch
// (internal/paytimeout's TestCancelBatchesConcurrently).
func TestPayTimeoutRestoresInBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 orders")
	}
	const n = 20000
	clk := &testClock{}
	fast := fastRestores(stacks[0].config(t))
	e := startEngine(t, func(c *Config) {
		fast(c)
		c.ReconcileInterval = time.Hour // the gauges' full comparison is not what this measures
	}, clk.hook())
	sale := e.liveSale(n, 1)
	ctx := context.Background()

	// Claims straight into the stock store, a full batch per script call:
	// what matters here is what happens after the orders land.
	for start := 0; start < n; start += 256 {
		reqs := make([]seckill.ReserveRequest, 0, 256)
		for i := start; i < min(start+256, n); i++ {
			reqs = append(reqs, seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale, time.Now()), UserID: fmt.Sprint("b", i), Qty: 1})
		}
		res, err := e.m.stock.StockStore().Reserve(ctx, sale, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != seckill.OutcomeReserved {
				t.Fatalf("claim: %+v", r)
			}
		}
	}
	sales := sqlstore.NewSaleStore(e.m.db)
	servicetest.WaitFor(t, 5*time.Minute, "every order persisted", func() bool {
		s, err := sales.Sale(ctx, sale)
		return err == nil && s.Unsold == 0
	})
	if lvl := e.stock(sale); lvl.Remaining() != 0 {
		t.Fatalf("remaining %d before the deadline", lvl.Remaining())
	}

	var announced atomic.Int64
	subCtx, stop := context.WithCancel(ctx)
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		_ = e.m.stock.Restorer().SubscribeRestocked(subCtx, func(s string) {
			if s == sale {
				announced.Add(1)
			}
		})
	}()
	defer func() { stop(); <-subDone }()

	clk.advance(e.m.Config.PayTimeout + time.Second) // every order is past its deadline now
	deadline := time.Now()
	servicetest.WaitFor(t, 5*time.Minute, "every unit back in Redis", func() bool { return e.stock(sale).Remaining() == n })
	took := time.Since(deadline)
	servicetest.WaitFor(t, time.Minute, "every unit back in the database", func() bool {
		s, err := sales.Sale(ctx, sale)
		return err == nil && s.Unsold == n
	})
	load := servicetest.LoadAverage()
	t.Logf("%d expired orders back in stock %v after their deadline (%.0f restores/s, sweep interval %v, load average %.1f on %d CPUs); %d restock announcements",
		n, took.Round(time.Millisecond), n/took.Seconds(), e.m.Config.SweepInterval, load, runtime.NumCPU(), announced.Load())
	servicetest.WantWithin(t, fmt.Sprintf("%d expired orders back in stock", n), took, 10*time.Second+e.m.Config.SweepInterval)
	if a := announced.Load(); a > n/100 {
		t.Errorf("%d restock announcements for %d restores: not batched", a, n)
	}
	report, code := e.reconcileCLI(sale)
	if code != 0 || report["balanced"] != true {
		t.Fatalf("reconcile after the restores: exit %d, %v", code, report)
	}
}
