package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// BenchmarkSoak runs a long sale on Redis + RabbitMQ + MariaDB the way
// issue 13 describes it, scaled by environment variables, and prints one
// line per window: reservations so far, the server's heap (at the end of
// the window and the highest sampled in it, once a second), its RSS,
// Redis's used_memory and the sale's own bytes per reservation (MEMORY
// USAGE of its keys), and the reservation latency p50/p99 of the window.
// The server and the load generator share the process (and the machine's
// two cores with everything else), so heap and RSS include the
// generator's few MB. Once every order has landed, the sale's full
// reconciliation runs (the archiver's last check), its time and heap
// printed.
//
//	SECKILL_SOAK_RESERVATIONS=1000000 SECKILL_SOAK_RATE=2000 \
//	go test -run XXX -bench Soak -benchtime 1x -timeout 2h ./cmd/seckill
//
// SECKILL_SOAK_RESERVATIONS (default 100000), SECKILL_SOAK_RATE
// reservations/s (default 2000), SECKILL_SOAK_SOLDOUT_RATE requests/s on a
// sold-out sale, every one with an Idempotency-Key (default 500),
// SECKILL_SOAK_WINDOW (default 30s), SECKILL_SOAK_BUYERS (default 20000).
func BenchmarkSoak(b *testing.B) {
	total := envInt(b, "SECKILL_SOAK_RESERVATIONS", 100000)
	rate := envInt(b, "SECKILL_SOAK_RATE", 2000)
	soldRate := envInt(b, "SECKILL_SOAK_SOLDOUT_RATE", 500)
	buyers := envInt(b, "SECKILL_SOAK_BUYERS", 20000)
	window, err := time.ParseDuration(envString("SECKILL_SOAK_WINDOW", "30s"))
	if err != nil {
		b.Fatal(err)
	}
	base := stacks[0].config(b)
	e := startEngine(b, func(c *Config) { base(c); c.SoldOutInterval = time.Hour })
	ctx := context.Background()
	now := time.Now()
	limit := int64(total/buyers + 2)
	sale := e.createSale(int64(total)*5, limit, now.Add(-time.Second), now.Add(24*time.Hour))
	soldOut := e.createSale(1, 1, now.Add(-time.Second), now.Add(24*time.Hour))
	if r := e.reserve(soldOut, e.token("first"), 1, "k"); r.status != 202 {
		b.Fatalf("sold-out sale: %d %v", r.status, r.body)
	}
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = e.token(fmt.Sprint("soak-", i))
	}

	var (
		done, failed atomic.Int64
		hist         atomic.Pointer[loadgen.Histogram]
		peakHeap     atomic.Uint64
		wg           sync.WaitGroup
		sem          = make(chan struct{}, 512)
	)
	hist.Store(loadgen.NewHistogram())
	post := func(sale, tok, key string, record bool) {
		defer wg.Done()
		defer func() { <-sem }()
		start := time.Now()
		req, _ := http.NewRequest("POST", e.base+"/api/v1/sales/"+sale+"/reservations", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if !record {
			return
		}
		if err != nil || resp.StatusCode != http.StatusAccepted {
			failed.Add(1)
			return
		}
		hist.Load().Record(time.Since(start))
		done.Add(1)
	}
	stop := make(chan struct{})
	go func() { // heap sampler: catches the spikes between windows
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			for {
				p := peakHeap.Load()
				if ms.HeapAlloc <= p || peakHeap.CompareAndSwap(p, ms.HeapAlloc) {
					break
				}
			}
		}
	}()
	defer close(stop)

	b.Logf("soak: %d reservations at %d/s (+%d/s keyed on a sold-out sale), %d buyers, windows of %v", total, rate, soldRate, buyers, window)
	fmt.Printf("%8s %12s %10s %10s %9s %11s %10s %8s %8s\n", "t", "reservations", "heap MB", "peak MB", "RSS MB", "redis MB", "B/resv", "p50", "p99")
	b.ResetTimer()
	began := time.Now()
	next := began
	interval := time.Second / time.Duration(rate)
	soldEvery := max(rate/max(soldRate, 1), 1)
	lastWindow := began
	var runPeak uint64
	var p50s []time.Duration
	for i := 0; i < total; i++ {
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go post(sale, tokens[i%buyers], "r"+strconv.Itoa(i), true)
		if soldRate > 0 && i%soldEvery == 0 {
			sem <- struct{}{}
			wg.Add(1)
			go post(soldOut, tokens[(i*7)%buyers], "s"+strconv.Itoa(i), false)
		}
		if time.Since(lastWindow) >= window || i == total-1 {
			if i == total-1 {
				wg.Wait()
			}
			lastWindow = time.Now()
			h := hist.Swap(loadgen.NewHistogram())
			peak := peakHeap.Swap(0)
			runPeak = max(runPeak, peak)
			p50s = append(p50s, h.Percentile(0.5))
			soakLine(b, ctx, e, sale, time.Since(began), done.Load(), peak, h)
		}
	}
	b.StopTimer()
	if fp, err := e.m.stock.Archive().Footprint(ctx, sale); err == nil && fp.Reservations > 0 {
		var parts []string
		for _, k := range []string{"res", "idem", "buyers", "outbox", "stock"} {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(fp.Keys[k])/float64(fp.Reservations)))
		}
		fmt.Printf("bytes per reservation by key: %s; after the end (idem dropped): %.1f\n", strings.Join(parts, ", "),
			float64(fp.Total-fp.Keys["idem"])/float64(fp.Reservations))
	}
	b.ReportMetric(float64(done.Load())/time.Since(began).Seconds(), "reservations/s")
	const heapBound = 150e6
	if len(p50s) > 0 {
		fmt.Printf("peak heap over the run %.1f MB (bound %.0f MB); p50 last window / first %.2f×\n",
			float64(runPeak)/1e6, heapBound/1e6, float64(p50s[len(p50s)-1])/float64(max(p50s[0], 1)))
	}
	if runPeak > heapBound {
		b.Errorf("peak heap %.1f MB over the %.0f MB bound", float64(runPeak)/1e6, heapBound/1e6)
	}

	// The full comparison, as the archiver's last check and the admin
	// report run it, once every order has landed: in pages, so its heap
	// is a few MB whatever the sale's size.
	servicetest.WaitFor(b, 10*time.Minute, "every order persisted", func() bool {
		c, err := e.m.orders.Ledger.SaleCounters(ctx, sale)
		return err == nil && c.Stock-c.Unsold >= done.Load()
	})
	var rep *reconcile.Report
	t0 := time.Now()
	peak := servicetest.PeakHeap(func() {
		rep, err = reconcile.Reconcile(ctx, sale, e.m.orders.Ledger, e.m.stock.Ledger(), time.Now(), reconcile.Options{})
	})
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("full reconciliation of %d reservations: %v, peak heap %.1f MB above the start, balanced %v\n",
		rep.StockStore.Active.Count+rep.StockStore.Restored.Count, time.Since(t0).Round(time.Millisecond), float64(peak)/1e6, rep.Balanced)
	if !rep.Balanced {
		b.Errorf("the soaked sale does not reconcile: %d discrepancies, oversold %d", len(rep.Discrepancies), rep.Oversold)
	}
	if n := failed.Load(); n > 0 {
		b.Errorf("%d reservations were not answered 202", n)
	}
}

func soakLine(b *testing.B, ctx context.Context, e *engine, sale string, at time.Duration, done int64, peak uint64, h *loadgen.Histogram) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	used, err := e.m.stock.Archive().UsedMemory(ctx)
	if err != nil {
		b.Logf("used memory: %v", err)
	}
	fp, err := e.m.stock.Archive().Footprint(ctx, sale)
	if err != nil {
		b.Logf("footprint: %v", err)
	}
	fmt.Printf("%8s %12d %10.1f %10.1f %9.1f %11.1f %10.1f %8s %8s\n", at.Round(time.Second), done,
		float64(ms.HeapAlloc)/1e6, float64(max(peak, ms.HeapAlloc))/1e6, float64(rss())/1e6, float64(used)/1e6,
		fp.BytesPerReservation(), h.Percentile(0.5).Round(10*time.Microsecond), h.Percentile(0.99).Round(10*time.Microsecond))
}

// rss is this process's resident set size, from /proc (0 elsewhere).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func envInt(b *testing.B, name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
