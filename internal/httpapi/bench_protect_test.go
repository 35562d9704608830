package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/soldout"
)

// The two benchmarks below run the production chain behind the full
// handler: guard (default in-flight cap) → token verification → body →
// sold-out gate → combiner → Redis script, on the real Redis. Run them
// together and compare ns/op:
//
//	go test -run '^$' -bench 'SoldOutPath|ReservePath' ./internal/httpapi
//
// BenchmarkSoldOutPath is a stampede on a sold-out sale, answered by the
// gate (one Redis call per safety interval); BenchmarkReservePath is the
// same request on a live sale, where every one ends in the script.

const benchUsers = 1000

// benchChain starts the chain on a fresh key prefix of the real Redis,
// with sale preheated, and removes the prefix's keys when b ends.
func benchChain(b *testing.B, sale *seckill.Sale) (*env, *soldout.Gate, *redis.Store) {
	b.Helper()
	return benchChainWith(b, sale, func(*Config) {})
}

// benchChainWith is benchChain with mod applied to the Server's Config.
func benchChainWith(b *testing.B, sale *seckill.Sale, mod func(*Config)) (*env, *soldout.Gate, *redis.Store) {
	b.Helper()
	store := benchRedis(b)
	if _, err := store.StockStore().Preheat(context.Background(), sale); err != nil {
		b.Fatalf("Preheat: %v", err)
	}
	comb := combiner.New(store.StockStore(), combiner.Config{})
	b.Cleanup(func() { _ = comb.Stop(context.Background()) })
	gate := soldout.New(comb, soldout.Config{})
	e := newEnv(b, func(c *Config) { c.Reserver = gate }, mod)
	return e, gate, store
}

// benchRedis is a store on a fresh key prefix of the real Redis; the
// prefix's keys go when b ends.
func benchRedis(b *testing.B) *redis.Store {
	b.Helper()
	url := servicetest.Redis.URL(b)
	prefix := servicetest.UniqueName("bench")
	store, err := redis.New(context.Background(), url, redis.WithKeyPrefix(prefix))
	if err != nil {
		b.Fatalf("redis.New: %v", err)
	}
	b.Cleanup(func() {
		store.Close()
		if err := redistest.DeletePrefix(url, prefix); err != nil {
			b.Errorf("delete bench keys under %s: %v", prefix, err)
		}
	})
	return store
}

func liveBenchSale(stock, limit int64) *seckill.Sale {
	return &seckill.Sale{
		ID: servicetest.UniqueName("bench_"), Name: "Tea", PriceCents: 100, Stock: stock, PurchaseLimit: limit,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour),
	}
}

func benchTokens(b *testing.B) []string {
	toks := make([]string, benchUsers)
	for i := range toks {
		toks[i] = "Bearer " + buyerToken(b, "bench-user-"+strconv.Itoa(i))
	}
	return toks
}

// runPath fires POST reservations for saleID in parallel, each with a
// real token, and checks every answer is want.
func runPath(b *testing.B, e *env, saleID string, want int) {
	b.Helper()
	toks := benchTokens(b)
	path := "/api/v1/sales/" + saleID + "/reservations"
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8) // 16 goroutines on 2 cores: enough to batch, not a queue
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := newRequest("POST", path, `{"qty":1}`)
			r.Header.Set("Authorization", toks[next.Add(1)%benchUsers])
			w := newRecorder()
			e.h.ServeHTTP(w, r)
			if w.Code != want {
				b.Errorf("status %d, want %d: %s", w.Code, want, w.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

func BenchmarkSoldOutPath(b *testing.B) {
	sale := liveBenchSale(1, 1)
	e, gate, _ := benchChain(b, sale)
	ctx := context.Background()
	for _, user := range []string{"first", "second"} { // the first takes the unit; the second flags
		if _, err := gate.Reserve(ctx, sale.ID, seckill.ReserveRequest{
			ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: user, Qty: 1,
		}); err != nil {
			b.Fatal(err)
		}
	}
	if !gate.SoldOut(sale.ID) {
		b.Fatal("the sale is not flagged sold out")
	}
	hits := gate.Hits()
	runPath(b, e, sale.ID, http.StatusConflict)
	b.ReportMetric(float64(gate.Hits()-hits)/float64(b.N), "local-answers/op")
}

func BenchmarkReservePath(b *testing.B) {
	sale := liveBenchSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
	e, _, _ := benchChain(b, sale)
	runPath(b, e, sale.ID, http.StatusAccepted)
}

// BenchmarkBlockedClient is a client hammering past its IP limit, on the
// real Redis limiter: after the first refusal, the block list answers.
// Compare with internal/redis BenchmarkAllowRefused, the Redis call each
// request would cost without it.
func BenchmarkBlockedClient(b *testing.B) {
	limiter := &countingLimiter{next: benchRedis(b).RateLimiter()}
	e := newEnv(b, func(c *Config) {
		c.Reserver = echoReserver{}
		c.RateLimiter, c.RateLimitIP = limiter, seckill.RateLimit{Rate: 1, Period: time.Hour}
	})
	benchReservations(b, e, "Bearer "+buyerToken(b, "blocked"), http.StatusTooManyRequests, http.StatusAccepted)
	b.ReportMetric(float64(limiter.calls.Load())/float64(b.N), "limiter-calls/op")
}

// BenchmarkSoldOutHandler is the sold-out answer as serve configures the
// route (both rate limits decided in the reserve call, a trusted proxy's
// X-Forwarded-For), with requests and response writers that cost nothing
// of their own: its allocs/op are the handler's alone. BenchmarkSoldOutPath
// counts those of httptest's request and recorder as well.
func BenchmarkSoldOutHandler(b *testing.B) {
	sale := liveBenchSale(1, 1)
	e, gate, _ := benchChainWith(b, sale, func(c *Config) {
		c.LimitInReserve = true
		c.RateLimitIP, c.RateLimitUser = DefaultRateLimitIP, DefaultRateLimitUser
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	ctx := context.Background()
	for _, user := range []string{"first", "second"} {
		if _, err := gate.Reserve(ctx, sale.ID, seckill.ReserveRequest{
			ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: user, Qty: 1,
		}); err != nil {
			b.Fatal(err)
		}
	}
	toks := benchTokens(b)
	path := "/api/v1/sales/" + sale.ID + "/reservations"
	serveBench(b, e.h, path, toks, http.StatusConflict)
}

var benchAddrs = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}

// nullWriter is a ResponseWriter that keeps only the status.
type nullWriter struct {
	h      http.Header
	status int
}

func (w *nullWriter) Header() http.Header { return w.h }

func (w *nullWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *nullWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

// serveBench runs b.N POSTs of {"qty":1} to path through h from 8
// goroutines a CPU, each request a buyer of toks (benchUsers of them) from
// a client address of benchAddrs behind the trusted proxy 192.0.2.1, with
// requests and writers reused so that allocs/op are the handler's alone;
// each must answer want.
func serveBench(b *testing.B, h http.Handler, path string, toks []string, want int) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		body := strings.NewReader(`{"qty":1}`)
		r := newRequest("POST", path, `{"qty":1}`)
		r.RemoteAddr = "192.0.2.1:5555"
		r.Header.Set("Content-Type", "application/json")
		r.Body = io.NopCloser(body)
		w := &nullWriter{h: http.Header{}}
		for pb.Next() {
			n := next.Add(1)
			r.Header["Authorization"] = toks[n%benchUsers : n%benchUsers+1]
			r.Header["X-Forwarded-For"] = benchAddrs[n%int64(len(benchAddrs)) : n%int64(len(benchAddrs))+1]
			body.Reset(`{"qty":1}`)
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, r)
			if w.status != want {
				b.Errorf("status %d, want %d", w.status, want)
				return
			}
		}
	})
}
