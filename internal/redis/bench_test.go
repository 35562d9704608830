package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

//go:embed testdata/textbook_reserve.lua
var textbookLua string

// benchParallelism × GOMAXPROCS goroutines reserve at once: 64 on the
// 2-core machine, as in the design's measurements. Auto-pipelining needs
// concurrent callers to have anything to pipeline.
const benchParallelism = 32

// benchUsers bounds the buyers hash; with the largest per-user limit no
// request is refused.
const benchUsers = 1000

func benchSale() *seckill.Sale {
	s := liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
	return s
}

// preheatedBench connects to the Redis at url and preheats a benchSale.
func preheatedBench(ctx context.Context, b *testing.B, url string) (*Store, *seckill.Sale) {
	b.Helper()
	s := connect(b, url)
	sale := benchSale()
	if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
		b.Fatalf("Preheat: %v", err)
	}
	return s, sale
}

// BenchmarkReserve measures the full reserve path (window, idempotency,
// limit, stock, record, outbox) on the real Redis, one Reserve call per
// op, each of `batch` requests.
func BenchmarkReserve(b *testing.B) {
	url := servicetest.Redis.URL(b)
	for _, batch := range []int{1, 64} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			s, sale := preheatedBench(ctx, b, url)
			users := make([]string, benchUsers)
			for i := range users {
				users[i] = "user-" + strconv.Itoa(i)
			}
			var next atomic.Int64
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				reqs := make([]seckill.ReserveRequest, batch)
				for pb.Next() {
					for i := range reqs {
						reqs[i] = seckill.ReserveRequest{
							ReservationID: seckill.NewReservationID(sale.ID, time.Now()),
							UserID:        users[next.Add(1)%benchUsers],
							Qty:           1,
						}
					}
					if !benchReserve(ctx, b, s, sale.ID, reqs) {
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "reservations/s")
		})
	}
}

// BenchmarkTextbookReserve is the baseline: the plain HMGET + HINCRBY
// script, one request per EVALSHA, under the same client and parallelism.
// Compare its reservations/s with BenchmarkReserve's from the same run.
func BenchmarkTextbookReserve(b *testing.B) {
	url := servicetest.Redis.URL(b)
	ctx := context.Background()
	s := connect(b, url)
	sale := benchSale()
	if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
		b.Fatalf("Preheat: %v", err)
	}
	script := rueidis.NewLuaScript(textbookLua)
	keys := s.keys(sale.ID)[:1]
	args := []string{"1"}
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n, err := script.Exec(ctx, s.client, keys, args).AsInt64()
			if err != nil || n != 1 {
				b.Errorf("textbook reserve = %d, %v; want 1", n, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
}

// ExampleStore shows the embedded default end to end.
func ExampleStore() {
	ctx := context.Background()
	store, err := StartEmbedded(ctx)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	sale := &seckill.Sale{
		ID: "tea", Name: "Tea gift set", Stock: 200, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour),
	}
	if _, err := store.StockStore().Preheat(ctx, sale); err != nil {
		panic(err)
	}
	res, err := store.StockStore().Reserve(ctx, "tea", []seckill.ReserveRequest{
		{ReservationID: seckill.NewReservationID("tea", time.Now()), UserID: "alice", Qty: 1},
		{ReservationID: seckill.NewReservationID("tea", time.Now()), UserID: "alice", Qty: 1},
	})
	if err != nil {
		panic(err)
	}
	level, _ := store.StockStore().Stock(ctx, "tea")
	fmt.Println(res[0].Outcome, res[1].Outcome, level.Remaining())
	// Output: reserved limit_exceeded 199
}

// benchReserve reserves reqs in one call and reports whether every one
// was reserved (failing b if not).
func benchReserve(ctx context.Context, b *testing.B, s *Store, saleID string, reqs []seckill.ReserveRequest) bool {
	res, err := s.StockStore().Reserve(ctx, saleID, reqs)
	if err != nil {
		b.Errorf("Reserve: %v", err)
		return false
	}
	for _, r := range res {
		if r.Outcome != seckill.OutcomeReserved {
			b.Errorf("outcome %s; want reserved", r.Outcome)
			return false
		}
	}
	return true
}

// BenchmarkReserveRateChecks is what the rate limits cost Redis inside the
// reserve script: batches of 32 requests from distinct addresses and
// buyers, with no checks and with the API's two (address, buyer), one
// call at a time. redis-cpu-µs/req is the server's CPU (INFO, so other
// clients of a shared Redis count too) per request:
//
//	go test -run '^$' -bench ReserveRateChecks -benchtime 2000x ./internal/redis
func BenchmarkReserveRateChecks(b *testing.B) {
	url := servicetest.Redis.URL(b)
	const batch = 32
	limit := seckill.RateLimit{Rate: 100_000, Period: time.Minute}
	for _, checks := range []int{0, 2} {
		b.Run("checks="+strconv.Itoa(checks), func(b *testing.B) {
			ctx := context.Background()
			s, sale := preheatedBench(ctx, b, url)
			reqs := make([]seckill.ReserveRequest, batch)
			next := 0
			before, err := s.ServerCPU(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				for i := range reqs {
					u := strconv.Itoa(next % 10_000)
					next++
					reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: "user-" + u, Qty: 1}
					if checks > 0 {
						reqs[i].RateChecks = []seckill.RateCheck{{Key: "ip:10.0." + u, Limit: limit}, {Key: "user:user-" + u, Limit: limit}}
					}
				}
				if !benchReserve(ctx, b, s, sale.ID, reqs) {
					return
				}
			}
			b.StopTimer()
			after, err := s.ServerCPU(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((after-before).Microseconds())/float64(b.N*batch), "redis-cpu-µs/req")
		})
	}
}
