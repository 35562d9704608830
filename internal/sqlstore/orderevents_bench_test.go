package sqlstore

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// BenchmarkPersistOrderEvents is what the event outbox adds to the order
// writer: batches of 500 new orders of one sale (the writer's
// --order-batch until 2026-12-07; the default is 1,000 now) persisted with no sink (no event rows) and with one (an
// order.created row per order, in the same transaction), on each
// dialect. The two take turns, b.N batches each in 5 rounds; reported
// are the median wall time and process CPU per order of each, and the
// median of the per-round ratios sink/no-sink:
//
//	go test -run '^$' -bench PersistOrderEvents -benchtime 20x ./internal/sqlstore
func BenchmarkPersistOrderEvents(b *testing.B) {
	const batch, rounds = 500, 5
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			stores := make([]*OrderStore, 2) // no sink, sink
			for i := range stores {
				db, err := Open(b.Context(), d.url(b))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				db.SetMaxConns(4)
				if err := db.Migrate(b.Context()); err != nil {
					b.Fatal(err)
				}
				if i == 1 {
					db.EnableOrderEvents()
				}
				s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: 1_000_000_000, PurchaseLimit: 10,
					StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
				if err := NewSaleStore(db).CreateSale(b.Context(), s); err != nil {
					b.Fatal(err)
				}
				stores[i] = NewOrderStore(db)
			}
			batchOf := teaBatches(batch)
			// One warm-up batch each: statements prepared, caches filled.
			for _, st := range stores {
				persistAll(b, st, [][]seckill.ReservationEvent{batchOf()})
			}
			perRound := max(1, b.N/rounds)
			wall := make([][]float64, 2) // µs per order, per round
			cpu := make([][]float64, 2)
			b.ResetTimer()
			for range rounds {
				for i, st := range stores {
					work := make([][]seckill.ReservationEvent, perRound)
					for k := range work {
						work[k] = batchOf()
					}
					c0, w0 := cpuTime(), time.Now()
					persistAll(b, st, work)
					n := float64(perRound * batch)
					wall[i] = append(wall[i], float64(time.Since(w0).Microseconds())/n)
					cpu[i] = append(cpu[i], float64((cpuTime()-c0).Microseconds())/n)
				}
			}
			b.StopTimer()
			wallRatio, cpuRatio := make([]float64, rounds), make([]float64, rounds)
			for r := range rounds {
				wallRatio[r], cpuRatio[r] = wall[1][r]/wall[0][r], cpu[1][r]/cpu[0][r]
			}
			b.ReportMetric(median(wall[0]), "wall-µs/order:no-sink")
			b.ReportMetric(median(wall[1]), "wall-µs/order:sink")
			b.ReportMetric(median(cpu[0]), "cpu-µs/order:no-sink")
			b.ReportMetric(median(cpu[1]), "cpu-µs/order:sink")
			b.ReportMetric(median(wallRatio), "wall-ratio:sink/no-sink")
			b.ReportMetric(median(cpuRatio), "cpu-ratio:sink/no-sink")
		})
	}
}
