package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/paytimeout"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// BenchmarkRestore compares, in one run on Redis + RabbitMQ + MariaDB, the
// one-at-a-time restore the payment-timeout sweeper used to make (per
// order: a database transaction, a Redis script, a second database write
// and a restock announcement) with the batched one it makes now
// (RestoreAll: per batch of 500, one transaction, one script call, one
// statement and one announcement). Each round restores a fresh set of
// orders both ways; the ratio reported is the median of the per-round
// ratios:
//
//	go test -run XXX -bench Restore -benchtime 3x ./cmd/seckill
func BenchmarkRestore(b *testing.B) {
	const perRound, batch = 1000, 500
	base := stacks[0].config(b)
	e := startEngine(b, func(c *Config) { base(c); c.ReconcileInterval = time.Hour })
	ctx := context.Background()
	sales := sqlstore.NewSaleStore(e.m.db)
	orders := func() (string, []string) {
		sale := benchSale(b, sales, perRound)
		if _, err := e.m.stock.StockStore().Preheat(ctx, sale); err != nil {
			b.Fatal(err)
		}
		var ids []string
		for start := 0; start < perRound; start += 256 {
			var reqs []seckill.ReserveRequest
			for i := start; i < min(start+256, perRound); i++ {
				reqs = append(reqs, seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: fmt.Sprint("u", i), Qty: 1})
			}
			if _, err := e.m.stock.StockStore().Reserve(ctx, sale.ID, reqs); err != nil {
				b.Fatal(err)
			}
			for _, r := range reqs {
				ids = append(ids, r.ReservationID)
			}
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			s, err := sales.Sale(ctx, sale.ID)
			if err != nil {
				b.Fatal(err)
			}
			if s.Unsold == 0 {
				return sale.ID, ids
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d orders persisted", perRound-s.Unsold, perRound)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	check := func(sale string) {
		if lvl := e.stock(sale); lvl.Remaining() != perRound {
			b.Fatalf("%d of %d units back in Redis", lvl.Remaining(), perRound)
		}
	}
	var single, batched, ratios []float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sale, ids := orders()
		b.StartTimer()
		start := time.Now()
		for _, id := range ids {
			if res, err := e.m.restorer.Restore(ctx, id, paytimeout.Reason); err != nil || res != seckill.Restored {
				b.Fatalf("Restore = %v, %v", res, err)
			}
		}
		one := perRound / time.Since(start).Seconds()
		check(sale)

		b.StopTimer()
		sale, ids = orders()
		b.StartTimer()
		start = time.Now()
		for i := 0; i < len(ids); i += batch {
			for _, o := range e.m.restorer.RestoreAll(ctx, sale, ids[i:min(i+batch, len(ids))], paytimeout.Reason) {
				if o.Err != nil || o.Result != seckill.Restored {
					b.Fatalf("RestoreAll: %+v", o)
				}
			}
		}
		all := perRound / time.Since(start).Seconds()
		check(sale)
		single, batched, ratios = append(single, one), append(batched, all), append(ratios, all/one)
	}
	b.ReportMetric(median(single), "one-by-one-restores/s")
	b.ReportMetric(median(batched), "batched-restores/s")
	b.ReportMetric(median(ratios), "ratio")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
