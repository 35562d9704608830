package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/eventdelivery"
)

// BenchmarkPruneWhileWriting is what pruning delivered events costs the
// order writer: batches of 500 new orders (with their order.created
// events) persisted alone, then while PruneDelivered deletes old
// delivered events 1,000 a statement flat out, then during a Pruner's
// pass (which rests between batches), in turns, 5 rounds of b.N/5
// batches each; before each round 100,000 old delivered events are
// seeded. Reported: the writer's median wall µs per order of each, the
// median per-round ratios to alone, the slowest batch of each, the
// rows/s deleted, and the slowest delete (the longest a writer could
// wait behind one):
//
//	go test -run '^$' -bench PruneWhileWriting -benchtime 10x ./internal/sqlstore
func BenchmarkPruneWhileWriting(b *testing.B) {
	const batch, rounds, seed = 500, 5, 50_000
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			ctx := b.Context()
			db, err := Open(ctx, d.url(b))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxConns(4)
			if err := db.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			db.EnableOrderEvents()
			s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: 1_000_000_000, PurchaseLimit: 10,
				StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
			if err := NewSaleStore(db).CreateSale(ctx, s); err != nil {
				b.Fatal(err)
			}
			st, es := NewOrderStore(db), NewEventStore(db)
			batchOf := teaBatches(batch)
			persistAll(b, st, [][]seckill.ReservationEvent{batchOf()}) // warm-up
			before := time.Now().Add(-24 * time.Hour)
			seeded := 0
			perRound := max(1, b.N/rounds)
			wall := make([][]float64, 3) // µs per order: alone, pruning flat out, a Pruner's pass
			slowest := make([]time.Duration, 3)
			var (
				pruned, passPruned  int
				pruneBusy, passTook time.Duration
				slowestPrune        time.Duration
			)
			pass, err := eventdelivery.NewPruner(eventdelivery.PruneConfig{Outbox: es, Keep: time.Since(before)})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range rounds {
				b.StopTimer()
				seedDelivered(b, db, seeded, seed, before.Add(-time.Hour))
				seeded += seed
				seedDelivered(b, db, seeded, seed, before.Add(-time.Hour)) // for the pass
				seeded += seed
				b.StartTimer()
				for i := range 3 {
					work := make([][]seckill.ReservationEvent, perRound)
					for k := range work {
						work[k] = batchOf()
					}
					pctx, stop := context.WithCancel(ctx)
					var wg sync.WaitGroup
					switch i {
					case 1: // flat out
						wg.Go(func() {
							for pctx.Err() == nil {
								t0 := time.Now()
								n, err := es.PruneDelivered(pctx, before, 1000)
								if err != nil || n == 0 {
									return
								}
								took := time.Since(t0)
								pruned, pruneBusy, slowestPrune = pruned+n, pruneBusy+took, max(slowestPrune, took)
							}
						})
					case 2: // the Pruner's pass, resting between batches
						wg.Go(func() {
							t0 := time.Now()
							n, _ := pass.Pass(pctx)
							passPruned, passTook = passPruned+n, passTook+time.Since(t0)
						})
					}
					w0 := time.Now()
					for _, evs := range work {
						t0 := time.Now()
						persistAll(b, st, [][]seckill.ReservationEvent{evs})
						slowest[i] = max(slowest[i], time.Since(t0))
					}
					wall[i] = append(wall[i], float64(time.Since(w0).Microseconds())/float64(perRound*batch))
					stop()
					wg.Wait()
				}
			}
			b.StopTimer()
			ratio, passRatio := make([]float64, rounds), make([]float64, rounds)
			for r := range rounds {
				ratio[r], passRatio[r] = wall[1][r]/wall[0][r], wall[2][r]/wall[0][r]
			}
			b.ReportMetric(median(wall[0]), "wall-µs/order:alone")
			b.ReportMetric(median(wall[1]), "wall-µs/order:flat-out")
			b.ReportMetric(median(wall[2]), "wall-µs/order:pass")
			b.ReportMetric(median(ratio), "wall-ratio:flat-out/alone")
			b.ReportMetric(median(passRatio), "wall-ratio:pass/alone")
			b.ReportMetric(float64(slowest[0].Microseconds())/1000, "slowest-batch-ms:alone")
			b.ReportMetric(float64(slowest[1].Microseconds())/1000, "slowest-batch-ms:flat-out")
			b.ReportMetric(float64(slowest[2].Microseconds())/1000, "slowest-batch-ms:pass")
			if passTook > 0 {
				b.ReportMetric(float64(passPruned)/passTook.Seconds(), "pass-rows/s")
			}
			b.ReportMetric(float64(pruned), "pruned-rows")
			if pruneBusy > 0 {
				b.ReportMetric(float64(pruned)/pruneBusy.Seconds(), "pruned-rows/s")
			}
			b.ReportMetric(float64(slowestPrune.Microseconds())/1000, "slowest-prune-ms")
		})
	}
}

// seedDelivered inserts n events delivered at at, numbered from first,
// 500 a statement.
func seedDelivered(b *testing.B, db *DB, first, n int, at time.Time) {
	b.Helper()
	const cols = `id, type, order_id, reservation_id, sale_id, user_id, qty, amount_cents, currency, at_ms,
		state, next_at_ms, retry_from_ms, delivered_at_ms`
	ms, bind := toMillis(at), db.dialect.sql.events.bind
	for start := 0; start < n; start += 500 {
		k := min(500, n-start)
		var q strings.Builder
		q.WriteString(`INSERT INTO order_events (` + cols + `) VALUES `)
		args := make([]any, 0, k*7)
		for j := range k {
			if j > 0 {
				q.WriteString(", ")
			}
			i := len(args)
			fmt.Fprintf(&q, "(%s, 'order.created', %s, %s, 'old', 'u', 1, 100, 'EUR', %s, 'delivered', %s, %s, %s)",
				bind(i+1), bind(i+2), bind(i+3), bind(i+4), bind(i+5), bind(i+6), bind(i+7))
			id := fmt.Sprintf("seed-%d", first+start+j)
			args = append(args, "ev-"+id, "o-"+id, "r-"+id, ms, ms, ms, ms)
		}
		if _, err := db.write.ExecContext(b.Context(), q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
}
