package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/bench"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestBenchCompareFlags: the command's flags reach the comparison, and
// its JSON and SVG outputs are written (internal/bench tests the
// comparison itself).
func TestBenchCompareFlags(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "compare.svg")
	code, stdout, stderr := runCommand(t, "bench", "compare", "--stock", "5", "--buyers", "50", "--concurrency", "16",
		"--strategies", "sql-conditional,seckill", "--json", "--svg", svg)
	if code != 0 {
		t.Fatalf("compare exited %d\n%s\n%s", code, stdout, stderr)
	}
	var rep bench.CompareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("compare output is not JSON: %v\n%s", err, stdout)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Strategy != "sql-conditional" || rep.Rows[1].Strategy != "seckill" || rep.Stock != 5 || rep.Buyers != 50 || rep.Concurrency != 16 {
		t.Errorf("--strategies, --stock, --buyers, --concurrency: %+v", rep)
	}
	if raw, err := os.ReadFile(svg); err != nil || !strings.HasPrefix(string(raw), "<svg") {
		t.Errorf("--svg wrote %.40q, %v", raw, err)
	}
	code, stdout, _ = runCommand(t, "bench", "compare", "--stock", "5", "--buyers", "50", "--strategies", "seckill")
	if code != 0 || !strings.Contains(stdout, "seckill bench compare: 50 buyers for 5 units") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}
	for _, args := range [][]string{{"bench", "compare", "--strategies", "nope"}, {"bench", "compare", "--stock", "0"}} {
		if code, _, _ := runCommand(t, args...); code == 0 {
			t.Errorf("%v exited 0", args)
		}
	}
}

// TestBenchThroughput runs every throughput benchmark briefly on the
// embedded default: counts, round order and ratios, never speeds.
// TestBenchEntriesMeasuresRepeats: bench entries primes every buyer once,
// so the entries and queue rounds measure repeats only (200, nothing
// unexpected), and states their ratios to the sold-out path.
func TestBenchEntriesMeasuresRepeats(t *testing.T) {
	code, stdout, stderr := runCommand(t, "bench", "entries", "--only", "soldout,entries,queue", "--duration", "300ms",
		"--warmup", "100ms", "--concurrency", "8", "--users", "50", "--clients", "20", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("bench entries exited %d\n%s\n%s", code, stdout, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	for i, round := range rep.Rounds {
		for _, r := range round {
			if r.Requests == 0 || r.Expected != r.Requests || r.Errors != 0 || len(r.Unexpected) != 0 {
				t.Errorf("round %d %s: %d requests, %d as expected, %d errors, others %v", i+1, r.Name, r.Requests, r.Expected, r.Errors, r.Unexpected)
			}
		}
	}
	for _, primed := range []string{"bench entries-on: every buyer once (50)", "bench queue: every buyer once (50)"} {
		if strings.Count(stderr, primed) != 1 {
			t.Errorf("stderr says %q %d times, want once (primed once for both rounds):\n%s", primed, strings.Count(stderr, primed), stderr)
		}
	}
	var compared []string
	for _, r := range rep.Ratios {
		compared = append(compared, r.Of+"/"+r.Base)
	}
	if got := strings.Join(compared, ","); got != "entries/soldout,queue/soldout" {
		t.Errorf("ratios %s; want entries/soldout,queue/soldout", got)
	}
}

func TestBenchThroughput(t *testing.T) {
	code, stdout, stderr := runCommand(t, "bench", "all", "--duration", "300ms", "--warmup", "100ms", "--concurrency", "8",
		"--users", "50", "--clients", "20", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("bench all exited %d\n%s\n%s", code, stdout, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	want := "hello,hello-post,textbook,live,live-nolimit,live-nopipe,soldout,soldout-nolimit"
	if got := strings.Join(rep.Names, ","); got != want {
		t.Fatalf("ran %s; want %s", got, want)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("%d rounds; want 2", len(rep.Rounds))
	}
	for i, round := range rep.Rounds {
		var names []string
		for _, r := range round {
			names = append(names, r.Name)
			if r.Round != i+1 {
				t.Errorf("round %d holds a result of round %d", i+1, r.Round)
			}
			if r.Requests == 0 || r.Expected != r.Requests || r.Errors != 0 || len(r.Unexpected) != 0 {
				t.Errorf("round %d %s: %d requests, %d as expected, %d errors, others %v", i+1, r.Name, r.Requests, r.Expected, r.Errors, r.Unexpected)
			}
			if r.ServerCPU <= 0 || r.LoadCPU <= 0 {
				t.Errorf("round %d %s: CPU µs/request server %v, load generator %v; want both measured", i+1, r.Name, r.ServerCPU, r.LoadCPU)
			}
			// The windows of the engines with a pipeline close once it
			// has persisted every claim; the others have none to wait for.
			if piped := r.Name == "live" || r.Name == "live-nolimit"; piped != (r.Settle > 0) || r.Backlog < 0 {
				t.Errorf("round %d %s: settled in %s with a backlog of %d", i+1, r.Name, r.Settle, r.Backlog)
			}
		}
		if strings.Join(names, ",") != want {
			t.Errorf("round %d in the order %v", i+1, names)
		}
	}
	for _, r := range rep.Ratios {
		if len(r.PerRound) != 2 || r.Median != bench.Median(r.PerRound) {
			t.Errorf("%s ÷ %s: median %v of per-round %v", r.Of, r.Base, r.Median, r.PerRound)
		}
		for k, v := range r.PerRound {
			a, b := result(t, rep.Rounds[k], r.Of), result(t, rep.Rounds[k], r.Base)
			want, of, base := a.RPS/b.RPS, a.RPS, b.RPS
			switch r.Metric {
			case "persisted/s": // the claims in the database per second of window and catch-up
				want, of = a.Persisted/b.RPS, a.Persisted
				if a.Persisted <= 0 || a.Persisted > a.RPS*1.01 {
					t.Errorf("round %d %s: %v persisted/s of %v req/s", k+1, r.Of, a.Persisted, a.RPS)
				}
			case "cpu/claim": // every process's CPU per request
				want, of, base = a.AllCPU()/b.AllCPU(), a.AllCPU(), b.AllCPU()
				if a.AllCPU() < a.ServerCPU || b.AllCPU() < b.ServerCPU {
					t.Errorf("round %d: all CPU %v, %v below the server's %v, %v", k+1, a.AllCPU(), b.AllCPU(), a.ServerCPU, b.ServerCPU)
				}
			}
			if v != want {
				t.Errorf("%s ÷ %s (%s) round %d = %v; want %v / %v of that round", r.Of, r.Base, r.Metric, k+1, v, of, base)
			}
		}
	}

	code, stdout, _ = runCommand(t, "bench", "hello", "--duration", "200ms", "--warmup", "0s", "--concurrency", "4")
	if code != 0 || !strings.Contains(stdout, "\n  hello ") || !strings.Contains(stdout, "\n  hello-post ") || strings.Contains(stdout, "\n  textbook ") {
		t.Errorf("bench hello: exit %d\n%s", code, stdout)
	}
	for _, args := range [][]string{{"bench"}, {"bench", "nope"}, {"bench", "hello", "--duration", "0s"}} {
		if code, _, _ := runCommand(t, args...); code == 0 {
			t.Errorf("%v exited 0", args)
		}
	}
}

func result(t *testing.T, round []bench.Result, name string) bench.Result {
	t.Helper()
	for _, r := range round {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s in the round", name)
	return bench.Result{}
}

var (
	jsonContentType = loadgen.Header{Name: "Content-Type", Value: "application/json"}
	qtyOneBody      = []byte(`{"qty":1}`)
)

// benchHTTP drives reservations through the whole HTTP stack of an
// in-process engine on the real Redis and MariaDB, from 64 goroutines,
// each on its own keep-alive connection.
func benchHTTP(b *testing.B, stock, limit int64, want int, prepare func(api *apiclient.Client, secret, sale string)) {
	m := startBenchEngine(b)
	api := apiclient.New("http://" + m.Addr())
	defer api.Close()
	ctx := context.Background()
	now := time.Now()
	sale := servicetest.UniqueName("b")
	st, err := api.Do(ctx, "POST", "/admin/v1/sales", m.Config.AdminToken, map[string]any{
		"id": sale, "name": "bench", "price_cents": 1, "stock": stock, "per_user_limit": limit,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
	}, nil)
	if err != nil || st != http.StatusCreated {
		b.Fatalf("create sale: %d %v", st, err)
	}
	if prepare != nil {
		prepare(api, m.Config.JWTSecret, sale)
	}
	tgt, _ := loadgen.ParseTarget("http://" + m.Addr())
	reqs := make([][]byte, 1000)
	for i := range reqs {
		tok, err := jwt.Sign([]byte(m.Config.JWTSecret), "hb-"+strconv.Itoa(i), time.Hour, now)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = tgt.AppendRequest(nil, "POST", "/api/v1/sales/"+sale+"/reservations", qtyOneBody,
			loadgen.Header{Name: "Authorization", Value: "Bearer " + tok}, jsonContentType)
	}
	var (
		next, bad atomic.Int64
		badOne    atomic.Value
	)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := loadgen.NewConn(tgt)
		defer c.Close()
		for pb.Next() {
			resp, err := c.Do(reqs[next.Add(1)%int64(len(reqs))])
			if err != nil || resp.Status != want {
				bad.Add(1)
				badOne.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", resp.Status, resp.Body, err))
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if n := bad.Load(); n > 0 {
		b.Errorf("%d requests not answered %d, e.g. %v", n, want, badOne.Load())
	}
}

// startBenchEngine runs Main on the real Redis and a fresh MariaDB
// database for a benchmark.
func startBenchEngine(b *testing.B) *Main {
	b.Helper()
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = b.TempDir()
	cfg.JWTSecret, cfg.AdminToken = "bench-jwt-secret-0123456789abcdef", "bench-admin-token-0123456789abcdef"
	cfg.RedisURL, cfg.DatabaseURL = servicetest.Redis.URL(b), sqltest.MySQL(b)
	cfg.RateLimitIP, cfg.RateLimitUser = "off", "off"
	logger, _ := newLogger(io.Discard, "error")
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: logger}
	if err := m.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			b.Errorf("close: %v", err)
		}
	})
	return m
}

// BenchmarkReserveHTTP: live reservations through the full API (JWT,
// combiner, reserve script with outbox, pipeline running behind).
func BenchmarkReserveHTTP(b *testing.B) {
	benchHTTP(b, seckill.MaxSaleStock, seckill.MaxPurchaseLimit, http.StatusAccepted, nil)
}

// BenchmarkSoldOutHTTP: the sold-out path through the full API.
func BenchmarkSoldOutHTTP(b *testing.B) {
	benchHTTP(b, 1, 1, http.StatusConflict, func(api *apiclient.Client, secret, sale string) {
		tok, _ := jwt.Sign([]byte(secret), "owner", time.Hour, time.Now())
		st, err := api.Do(context.Background(), "POST", "/api/v1/sales/"+sale+"/reservations", tok, map[string]any{"qty": 1}, nil)
		if err != nil || st != http.StatusAccepted {
			b.Fatalf("buy the only unit: %d %v", st, err)
		}
	})
}
