package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// bucketBenchKs are the bucket counts compared, K = 1 being the baseline.
var bucketBenchKs = []int64{1, 2, 3}

// BenchmarkBuckets is one hot sale on a 3-master Redis Cluster with its
// stock in K = 1, 2 and 3 buckets. Each op is one round: for every K in
// turn (interleaved, so the machine's load falls on all alike), a fresh
// sale takes bucketBenchPerRound reservations from benchParallelism ×
// GOMAXPROCS goroutines, each Reserve a batch of 16 requests (what the
// combiner sends under a stampede). It reports, per K, the median
// reservations/s, the median per-round ratio to K = 1, and the Redis CPU
// (INFO CPU, user + sys, summed over the masters) per reservation, with
// the busiest master's share of it and the share spent in the kernel
// (sys: reading and writing sockets); and a control, K = 1 at the batch
// size each of 3 buckets gets (64/3 = 21).
//
//	go test -run '^$' -bench BenchmarkBuckets -benchtime 5x ./internal/redis/
func BenchmarkBuckets(b *testing.B) {
	const batch = 64
	cluster := redistest.StartCluster(b)
	s := connect(b, cluster.URL())
	ctx := context.Background()
	rates := map[int64][]float64{}
	ratios := map[int64][]float64{}
	cpu := map[int64][]float64{}
	busiest := map[int64][]float64{}
	sys := map[int64][]float64{}
	b.ResetTimer()
	// The control, K = 1 with the batch each of 3 buckets gets, tells the
	// cost of smaller script calls from the cost of more Redis processes.
	const control = 0
	for range b.N {
		round := map[int64]float64{}
		for _, k := range append([]int64{control}, bucketBenchKs...) {
			sale := liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
			sale.Buckets = max(k, 1)
			if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
				b.Fatal(err)
			}
			size := batch
			if k == control {
				size = batch / 3
			}
			before, sysBefore := masterCPU(b, s)
			took := reserveFlat(b, s, sale.ID, bucketBenchPerRound, size)
			after, sysAfter := masterCPU(b, s)
			var used, top float64
			for addr, v := range after {
				d := v - before[addr]
				used += d
				top = max(top, d)
			}
			rate := float64(bucketBenchPerRound) / took.Seconds()
			round[k] = rate
			rates[k] = append(rates[k], rate)
			cpu[k] = append(cpu[k], used*1e6/bucketBenchPerRound)
			busiest[k] = append(busiest[k], top/used)
			sys[k] = append(sys[k], (sysAfter-sysBefore)/used)
		}
		for _, k := range bucketBenchKs {
			ratios[k] = append(ratios[k], round[k]/round[1])
		}
	}
	b.StopTimer()
	b.ReportMetric(median(rates[control]), "K1batch21-res/s")
	b.ReportMetric(median(cpu[control]), "K1batch21-redis-µs/res")
	for _, k := range bucketBenchKs {
		name := "K" + strconv.FormatInt(k, 10)
		b.ReportMetric(median(rates[k]), name+"-res/s")
		b.ReportMetric(median(ratios[k]), name+"-×K1")
		b.ReportMetric(median(cpu[k]), name+"-redis-µs/res")
		b.ReportMetric(median(busiest[k]), name+"-busiest-master-share")
		b.ReportMetric(median(sys[k]), name+"-redis-sys-share")
	}
}

// bucketBenchPerRound is the reservations one K takes in one round.
const bucketBenchPerRound = 40_000

// reserveFlat makes n reservations of one unit on saleID, in batches, from
// many goroutines at once, and returns how long they took.
func reserveFlat(b *testing.B, s *Store, saleID string, n, batch int) time.Duration {
	b.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range benchParallelism * 2 {
		wg.Go(func() {
			reqs := make([]seckill.ReserveRequest, batch)
			for {
				lo := int(next.Add(int64(batch))) - batch
				if lo >= n {
					return
				}
				for i := range reqs {
					reqs[i] = seckill.ReserveRequest{
						ReservationID: seckill.NewReservationID(saleID, time.Now()),
						UserID:        "user-" + strconv.Itoa((lo+i)%benchUsers),
						Qty:           1,
					}
				}
				if !benchReserve(context.Background(), b, s, saleID, reqs) {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// masterCPU reads used_cpu_user + used_cpu_sys (seconds) of every master,
// and the sum of used_cpu_sys.
func masterCPU(b *testing.B, s *Store) (map[string]float64, float64) {
	b.Helper()
	out := map[string]float64{}
	var sys float64
	for addr, node := range s.client.Nodes() {
		info, err := node.Do(context.Background(), node.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatalf("INFO cpu on %s: %v", addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					b.Fatalf("INFO cpu on %s: %q: %v", addr, line, err)
				}
				out[addr] += v
				if name == "used_cpu_sys" {
					sys += v
				}
			}
		}
	}
	if len(out) == 0 {
		b.Fatal(fmt.Errorf("no Redis node to read INFO cpu from"))
	}
	return out, sys
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
