package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestNewRequiresDependencies(t *testing.T) {
	full := Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{}, Verifier: jwt.NewVerifier(testSecret)}
	for name, mod := range map[string]func(*Config){
		"Sales":    func(c *Config) { c.Sales = nil },
		"Stock":    func(c *Config) { c.Stock = nil },
		"Reserver": func(c *Config) { c.Reserver = nil },
		"Verifier": func(c *Config) { c.Verifier = nil },
	} {
		c := full
		mod(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without %s: err = %v, want one naming it", name, err)
		}
	}
	// Defaults suffice otherwise.
	s, err := New(full)
	if err != nil {
		t.Fatal(err)
	}
	if w := serve(s.Handler(), newRequest("GET", "/metrics", "")); w.Code != 200 || !strings.Contains(w.Body.String(), "seckill_reservations_total") {
		t.Fatalf("/metrics on the private registry: %d %s", w.Code, w.Body)
	}
}

func TestNewReportsDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{}, Verifier: jwt.NewVerifier(testSecret), Registerer: reg}
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c); err == nil {
		t.Fatal("a second Server on the same registry: want a registration error")
	}
}

func TestRoutingErrorsUseErrorShape(t *testing.T) {
	e := newEnv(t)
	wantError(t, e.do(req{method: "GET", path: "/nope"}), http.StatusNotFound, seckill.ENOTFOUND)
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID + "/"}), http.StatusNotFound, seckill.ENOTFOUND)

	w := e.do(req{method: "DELETE", path: "/api/v1/sales/" + testSaleID})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
	if got := w.Header().Get("Allow"); got != "GET, HEAD" {
		t.Fatalf("Allow = %q, want GET, HEAD", got)
	}
	w = e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID + "/reservations", auth: "Bearer " + buyerToken(t, "bob")})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
	if got := w.Header().Get("Allow"); got != "POST" {
		t.Fatalf("Allow = %q, want POST", got)
	}
	if e.reserver.count() != 0 {
		t.Fatal("a GET reached the reserver")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var readyErr error
	e := newEnv(t, func(c *Config) {
		c.Ready = func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("readiness check without a deadline")
			}
			return readyErr
		}
	})
	if w := e.do(req{method: "GET", path: "/healthz"}); w.Code != 200 || w.Body.String() != "{\"status\":\"ok\"}\n" {
		t.Fatalf("/healthz: %d %q", w.Code, w.Body)
	}
	if w := e.do(req{method: "GET", path: "/readyz"}); w.Code != 200 {
		t.Fatalf("/readyz ready: %d %s", w.Code, w.Body)
	}
	readyErr = errors.New("redis: dial tcp 10.1.2.3:6379: connection refused")
	e.clock.Advance(readyFor) // one check answers for readyFor
	w := e.do(req{method: "GET", path: "/readyz"})
	wantError(t, w, http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
	if strings.Contains(w.Body.String(), "10.1.2.3") {
		t.Fatalf("/readyz leaked the cause: %s", w.Body)
	}
	if !strings.Contains(e.logs.String(), "10.1.2.3") {
		t.Fatalf("/readyz did not log the cause for operators: %q", e.logs)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.reserve("alice", testSaleID, `{"qty":1}`, nil)
	e.reserve("alice", testSaleID, `{"qty":0}`, nil)
	e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`})
	e.do(req{method: "GET", path: "/nope"})

	text := e.scrape()
	for _, want := range []string{
		`seckill_reservations_total{outcome="reserved"} 1`,
		`seckill_reservations_total{outcome="invalid_request"} 1`,
		`seckill_reservations_total{outcome="unauthorized"} 1`,
		`seckill_reservations_total{outcome="sold_out"} 0`,
		`seckill_reserve_duration_seconds_count 3`,
		`seckill_reserve_duration_seconds_bucket{le="0.0001"}`,
		`seckill_http_requests_total{route="POST /api/v1/sales/{id}/reservations",status="202"} 1`,
		`seckill_http_requests_total{route="POST /api/v1/sales/{id}/reservations",status="400"} 1`,
		`seckill_http_requests_total{route="POST /api/v1/sales/{id}/reservations",status="401"} 1`,
		`seckill_http_requests_total{route="unmatched",status="404"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestMetricsToken: with a MetricsToken, /metrics answers only the
// scraper that sends it: no token, a wrong one, a buyer's or the admin's
// get 401 in the API's shape and no metrics.
func TestMetricsToken(t *testing.T) {
	const tok = "metrics-token-0123456789abcdefghij"
	e := newEnv(t, func(c *Config) { c.MetricsToken = tok })
	for name, auth := range map[string]string{
		"none": "", "wrong": "Bearer " + tok + "x", "a buyer's": "Bearer " + buyerToken(t, "alice"), "the admin's": "Bearer " + testAdminToken,
	} {
		w := e.do(req{method: "GET", path: "/metrics", auth: auth})
		wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
		if strings.Contains(w.Body.String(), "seckill_") {
			t.Errorf("%s token: metrics in the refusal: %s", name, w.Body)
		}
	}
	w := e.do(req{method: "GET", path: "/metrics", auth: "Bearer " + tok})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `seckill_http_requests_total{route="GET /metrics",status="401"} 4`) {
		t.Fatalf("with the token: %d %s", w.Code, w.Body)
	}
}

func TestPanicBecomes500(t *testing.T) {
	e := newEnv(t)
	e.reserver.set(func(string, seckill.ReserveRequest) (seckill.ReserveResult, error) { panic("boom") })
	w := e.reserve("bob", testSaleID, `{"qty":1}`, nil)
	wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
	if !strings.Contains(e.logs.String(), "boom") {
		t.Fatalf("panic not logged: %q", e.logs)
	}
}

func TestErrorTable(t *testing.T) {
	want := map[string]int{
		seckill.ESOLDOUT: 409, seckill.EPURCHASELIMIT: 409, seckill.ENOTSTARTED: 409, seckill.EENDED: 409,
		seckill.ECONFLICT: 409, seckill.ESTATECONFLICT: 409, seckill.EKEYREUSED: 422, seckill.EINVALID: 400,
		seckill.EUNAUTHORIZED: 401, seckill.ENOTFOUND: 404, seckill.ESALENOTFOUND: 404, seckill.ETOOLARGE: 413,
		seckill.ERATELIMITED: 429, seckill.EOVERLOADED: 503, seckill.EUNAVAILABLE: 503, seckill.EINTERNAL: 500,
		seckill.EMETHODNOTALLOW: 405, "made-up": 500,
	}
	for code, status := range want {
		if got := ErrorStatus(code); got != status {
			t.Errorf("ErrorStatus(%q) = %d, want %d", code, got, status)
		}
	}
}

func TestWriteErrorKeepsRetryAfter(t *testing.T) {
	w := newRecorder()
	w.Header().Set("Retry-After", "17")
	WriteError(w, seckill.Errorf(seckill.ERATELIMITED, "Slow down."))
	wantError(t, w, http.StatusTooManyRequests, seckill.ERATELIMITED)
	if got := w.Header().Get("Retry-After"); got != "17" {
		t.Fatalf("Retry-After = %q, want the caller's 17", got)
	}
	w = newRecorder()
	WriteError(w, errors.New("secret detail"))
	wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
	if strings.Contains(w.Body.String(), "secret detail") {
		t.Fatal("WriteError showed an internal error's text")
	}
}

// TestOverRealServer runs the handler behind net/http's server, where
// the body cap and connection handling are the real ones.
func TestOverRealServer(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	client := ts.Client()
	defer client.Transport.(*http.Transport).CloseIdleConnections()

	post := func(body string) *http.Response {
		t.Helper()
		r, err := http.NewRequest("POST", ts.URL+"/api/v1/sales/"+testSaleID+"/reservations", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+buyerToken(t, "bob"))
		r.Header.Set("idempotency-key", "lower-case-header-name")
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post(`{"qty":1}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := e.reserver.last(t).req.IdempotencyKey; got != "lower-case-header-name" {
		t.Fatalf("idempotency key = %q", got)
	}
	resp := post(`{"qty":1,"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d for a 64 KiB body, want 413", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":"body_too_large"`) {
		t.Fatalf("body %s", body)
	}
	if e.reserver.count() != 1 {
		t.Fatalf("reserver calls = %d, want 1", e.reserver.count())
	}
}

// TestReadinessShared: /readyz is public, and a readiness check pings every
// backend, so the probes of readyFor share one check (those that come
// while it runs wait for it) and one warning: a client asking in a loop
// cannot make the backends answer for each request. A change shows once
// readyFor has passed.
func TestReadinessShared(t *testing.T) {
	var checks atomic.Int64
	release := make(chan struct{})
	var down atomic.Bool
	e := newEnv(t, func(c *Config) {
		c.Ready = func(context.Context) error {
			if checks.Add(1) == 1 {
				<-release
			}
			if down.Load() {
				return errors.New("database: connection refused")
			}
			return nil
		}
	})
	readyz := func() int { return e.do(req{method: "GET", path: "/readyz"}).Code }
	codes := make(chan int, 20)
	for range 20 {
		go func() { codes <- readyz() }()
	}
	servicetest.WaitFor(t, 10*time.Second, "a check begun", func() bool { return checks.Load() == 1 })
	close(release)
	for range 20 {
		if c := <-codes; c != http.StatusOK {
			t.Fatalf("a probe during the check: %d; want 200", c)
		}
	}
	down.Store(true)
	for range 30 {
		if c := readyz(); c != http.StatusOK {
			t.Fatalf("a probe within %s of the check: %d; want its 200", readyFor, c)
		}
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("50 probes within %s made %d checks; want 1", readyFor, n)
	}
	e.clock.Advance(readyFor)
	for range 30 {
		if c := readyz(); c != http.StatusServiceUnavailable {
			t.Fatalf("a probe after the backend went down and %s passed: %d; want 503", readyFor, c)
		}
	}
	if n := checks.Load(); n != 2 {
		t.Fatalf("%d checks; want 2", n)
	}
	if n := strings.Count(e.logs.String(), "not ready"); n != 1 {
		t.Fatalf("%d warnings for 30 probes of one failed check; want 1", n)
	}
}
