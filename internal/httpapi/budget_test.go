package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// hangingStock is a stock store that answers only when its caller gives up,
// as a blackholed Redis does to a client without deadlines.
type hangingStock struct{ Preheater }

func (hangingStock) Stock(ctx context.Context, _ string) (seckill.StockLevel, error) {
	<-ctx.Done()
	return seckill.StockLevel{}, fmt.Errorf("stock: %w", ctx.Err())
}

// TestBudgetEndsHangingCalls: a backend that never answers costs a request
// its route's budget, then a 503 unavailable with Retry-After in the error
// shape; never a hang, never a 500.
func TestBudgetEndsHangingCalls(t *testing.T) {
	const budget = 150 * time.Millisecond
	e := newEnv(t, func(c *Config) {
		c.Budget = budget
		c.Stock = hangingStock{fakestore.NewStock()}
		c.Reserver = reserverFunc(func(ctx context.Context) (seckill.ReserveResult, error) {
			<-ctx.Done()
			return seckill.ReserveResult{}, ctx.Err()
		})
	})
	e.sales.Put(testSale())
	for _, r := range []req{
		{method: "GET", path: "/api/v1/sales/" + testSaleID},
		{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`, auth: "Bearer " + buyerToken(t, "ann")},
	} {
		start := time.Now()
		w := e.do(r)
		took := time.Since(start)
		wantError(t, w, http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", r.method, r.path)
		}
		if took < budget {
			t.Errorf("%s %s answered after %s; want just after the budget %s", r.method, r.path, took, budget)
		}
		servicetest.WantWithin(t, fmt.Sprintf("%s %s answered (just after the budget %s)", r.method, r.path, budget), took, budget+2*time.Second)
	}
	assertMetric(t, e, `seckill_http_degraded_total{reason="unavailable",route="GET /api/v1/sales/{id}"} 1`)
	assertMetric(t, e, `seckill_http_degraded_total{reason="unavailable",route="POST /api/v1/sales/{id}/reservations"} 1`)
}

type reserverFunc func(ctx context.Context) (seckill.ReserveResult, error)

func (f reserverFunc) Reserve(ctx context.Context, _ string, _ seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return f(ctx)
}

// TestRouteBudgets: a route's own budget wins over the default, and a
// client that hangs up is not answered (nor counted as an outage).
func TestRouteBudgets(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Budget = time.Hour
		c.RouteBudgets = map[string]time.Duration{"sale": 100 * time.Millisecond}
		c.Stock = hangingStock{fakestore.NewStock()}
	})
	e.sales.Put(testSale())
	start := time.Now()
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
	servicetest.WantWithin(t, "the answer under the route's budget", time.Since(start), 2*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("GET", "/api/v1/sales/"+testSaleID, nil).WithContext(ctx)
	w := httptest.NewRecorder()
	time.AfterFunc(20*time.Millisecond, cancel)
	e.h.ServeHTTP(w, r)
	if w.Body.Len() != 0 {
		t.Fatalf("a request whose client left was answered: %d %s", w.Code, w.Body)
	}
	assertMetric(t, e, `seckill_http_requests_total{route="GET /api/v1/sales/{id}",status="499"} 1`)

	for _, bad := range []map[string]time.Duration{{"nope": time.Second}, {"sale": 0}} {
		cfg := Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{}, Verifier: jwt.NewVerifier(testSecret)}
		if _, err := New(cfg); err != nil {
			t.Fatalf("New without route budgets: %v", err)
		}
		cfg.RouteBudgets = bad
		if _, err := New(cfg); err == nil {
			t.Errorf("New accepted route budgets %v", bad)
		}
	}
	if _, err := ParseRouteBudgets("reserve=1s, reconciliation=2500ms"); err != nil {
		t.Errorf("ParseRouteBudgets: %v", err)
	}
	for _, bad := range []string{"reserve", "nope=1s", "reserve=-1s", "reserve=soon"} {
		if _, err := ParseRouteBudgets(bad); err == nil {
			t.Errorf("ParseRouteBudgets(%q) accepted", bad)
		}
	}
}

// TestStaleSaleView: with the database or Redis down, the public sale
// view is the last good copy, marked stale with its age, and counted; with
// no good copy to fall back on, it is a 503.
func TestStaleSaleView(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SaleCacheTTL = time.Millisecond })
	e.sales.Put(testSale())
	e.stock.Levels[testSaleID] = seckill.StockLevel{Total: 200, Reserved: 20}
	var v saleView
	decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusOK, &v)
	if v.Stale || v.Remaining != 180 {
		t.Fatalf("fresh view = %+v", v)
	}
	down := errors.Join(errors.New("connection refused"), &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "down"})

	for _, c := range []struct {
		name         string
		sales, stock error
	}{
		{"redis down", nil, down},
		{"database down", down, nil},
		{"both down", down, down},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.stock.Mu.Lock()
			e.stock.Levels[testSaleID] = seckill.StockLevel{Total: 200, Reserved: 50}
			e.stock.Err = nil
			e.stock.Mu.Unlock()
			e.sales.Mu.Lock()
			e.sales.Err = nil
			e.sales.Mu.Unlock()
			e.clock.Set(e.clock.Now().Add(time.Second)) // past the cache TTL
			decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusOK, &v)
			// Now break what the case breaks.
			e.stock.Mu.Lock()
			e.stock.Err = c.stock
			if c.stock != nil {
				e.stock.Levels[testSaleID] = seckill.StockLevel{Total: 200, Reserved: 20}
			}
			e.stock.Mu.Unlock()
			e.sales.Mu.Lock()
			e.sales.Err = c.sales
			e.sales.Mu.Unlock()
			e.clock.Set(e.clock.Now().Add(3 * time.Second))
			v = saleView{}
			decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusOK, &v)
			if !v.Stale || v.AgeMS == nil || *v.AgeMS != 3000 || v.Remaining != 150 || v.Name != "Tea gift set" {
				t.Fatalf("view with %s = %+v (age %v); want the last good copy, stale, 3000 ms old", c.name, v, v.AgeMS)
			}
		})
	}
	assertMetric(t, e, `seckill_http_degraded_total{reason="stale",route="GET /api/v1/sales/{id}"} 3`)

	// A sale never seen while its backends were up has no copy to serve.
	other := testSale()
	other.ID = "other-sale"
	e.sales.Put(other)
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/other-sale"}), http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
}

// BenchmarkBudgetOverhead measures what the budget costs each request: the
// same trivial handler behind instrument, with a budget (every API route)
// and without (liveness), in alternating rounds of b.N requests each on
// one goroutine. It reports the median of the per-round ratios of CPU
// time (the process's, from getrusage: the machine is shared, so wall
// time says more about the neighbours) and the median CPU µs per request
// of each.
//
//	go test -run '^$' -bench BudgetOverhead -benchtime 20000x ./internal/httpapi
func BenchmarkBudgetOverhead(b *testing.B) {
	e := newEnv(b)
	trivial := func(w http.ResponseWriter, _ *http.Request) int {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	without := e.srv.instrument("GET /healthz", trivial)
	with := e.srv.instrument("GET /bench-budgeted", trivial)
	req := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	run := func(h http.Handler) float64 {
		start := cpuTime(b)
		for range b.N {
			h.ServeHTTP(w, req)
		}
		return float64((cpuTime(b) - start).Nanoseconds()) / float64(b.N)
	}
	const rounds = 9
	var ratios, base, budgeted []float64
	b.ResetTimer()
	for range rounds {
		n0, n1 := run(without), run(with)
		base, budgeted = append(base, n0), append(budgeted, n1)
		ratios = append(ratios, n1/n0)
	}
	b.ReportMetric(median(ratios), "x-budget/none")
	b.ReportMetric(median(base)/1000, "cpu-µs/req-none")
	b.ReportMetric(median(budgeted)/1000, "cpu-µs/req-budget")
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestLazyBudget: the budget's context answers as
// context.WithDeadlineCause would, and makes its timer only when waited on.
func TestLazyBudget(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")

	ctx, cancel := withBudget(parent, time.Now(), time.Hour)
	b := ctx.(*lazyBudget)
	if ctx.Value(key{}) != "v" {
		t.Error("a value of the parent is lost")
	}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Errorf("deadline %v, %v; want an hour from now", d, ok)
	}
	if b.made.Load() {
		t.Error("a context was made before anything waited on it")
	}
	if ctx.Err() != nil {
		t.Errorf("Err %v before the deadline", ctx.Err())
	}
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != context.Canceled {
		t.Errorf("after cancel: Err %v, Cause %v; want canceled", ctx.Err(), context.Cause(ctx))
	}

	// A deadline passed with nothing waiting: the cause is still the budget.
	ctx, cancel = withBudget(parent, time.Now().Add(-time.Second), time.Millisecond)
	defer cancel()
	if !errors.Is(context.Cause(ctx), errBudgetSpent) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("past the deadline: Cause %v, Err %v; want the budget, deadline exceeded", context.Cause(ctx), ctx.Err())
	}
	if clientGone(ctx) {
		t.Error("a spent budget reads as a client gone")
	}

	// A child waits on the budget and ends with it.
	ctx, cancel = withBudget(parent, time.Now(), time.Hour)
	child, stopChild := context.WithCancel(ctx)
	defer stopChild()
	cancel()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("child Err %v, want canceled", child.Err())
	}
}

// TestReconciliationBudget: the full reconciliation (about 2-3 s per
// 100,000 reservations) runs by default under its own long budget, not the
// 2 s of every other route, still overridable by RouteBudgets; and the
// server's WriteTimeout does not cut it off before it answers.
func TestReconciliationBudget(t *testing.T) {
	if ReconciliationBudget < time.Minute {
		t.Fatalf("ReconciliationBudget %s: a sale of a million reservations needs about 30 s", ReconciliationBudget)
	}
	const route = "GET /admin/v1/sales/{id}/reconciliation"
	release := make(chan struct{})
	deadlines := make(chan time.Duration, 1)
	reconcile := func(ctx context.Context, saleID string) (any, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		deadlines <- time.Until(dl)
		<-release
		return map[string]any{"sale_id": saleID, "balanced": true}, nil
	}
	e := newEnv(t, func(c *Config) { c.Reconcile = reconcile })
	if got := e.srv.budgetOf(route); got != ReconciliationBudget {
		t.Errorf("default budget of %s: %s, want %s", route, got, ReconciliationBudget)
	}
	if got := e.srv.budgetOf("GET /api/v1/sales/{id}"); got != DefaultBudget {
		t.Errorf("default budget of the sale view: %s, want %s", got, DefaultBudget)
	}
	over := newEnv(t, func(c *Config) { c.RouteBudgets = map[string]time.Duration{"reconciliation": 5 * time.Second} })
	if got := over.srv.budgetOf(route); got != 5*time.Second {
		t.Errorf("overridden budget of %s: %s, want 5s", route, got)
	}

	// Served with a WriteTimeout far below the budget, the report answered
	// after it still reaches the client.
	const writeTimeout = 100 * time.Millisecond
	ts := httptest.NewUnstartedServer(e.h)
	ts.Config.WriteTimeout = writeTimeout
	ts.Start()
	defer ts.Close()
	rq, err := http.NewRequest("GET", ts.URL+"/admin/v1/sales/"+testSaleID+"/reconciliation", nil)
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Authorization", "Bearer "+testAdminToken)
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := ts.Client().Do(rq)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answers <- answer{resp.StatusCode, string(b), err}
	}()
	if left := <-deadlines; left < ReconciliationBudget-time.Minute {
		t.Errorf("the report's context has %s left, want about %s", left, ReconciliationBudget)
	}
	// Past the server's WriteTimeout: the connection's own deadline is
	// what would cut the answer.
	time.AfterFunc(3*writeTimeout, func() { close(release) })
	a := <-answers
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"balanced":true`) {
		t.Fatalf("report answered after the WriteTimeout: %d %q %v", a.status, a.body, a.err)
	}
}
