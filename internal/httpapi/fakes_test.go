package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// In-memory fakes of the ports. Each records its calls so tests can assert
// what the API did, and did not, touch.

type reserveCall struct {
	saleID string
	req    seckill.ReserveRequest
}

// fakeReserver answers with fn, or OutcomeReserved with the proposed id.
type fakeReserver struct {
	mu    sync.Mutex
	calls []reserveCall
	fn    func(saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error)
}

func (f *fakeReserver) Reserve(_ context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, reserveCall{saleID, req})
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(saleID, req)
	}
	return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: req.ReservationID, Qty: req.Qty}, nil
}

func (f *fakeReserver) set(fn func(string, seckill.ReserveRequest) (seckill.ReserveResult, error)) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

func (f *fakeReserver) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeReserver) last(t *testing.T) reserveCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		t.Fatal("the reserver was not called")
	}
	return f.calls[len(f.calls)-1]
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

const (
	testAdminToken = "admin-token-0123456789abcdefghij"
	testSaleID     = "tea-2030"
)

var (
	testSecret = []byte("test-secret-0123456789abcdefghijklmn")
	// t0 is an hour before testSale starts.
	t0 = time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC)
)

func testSale() *seckill.Sale {
	return &seckill.Sale{
		ID:            testSaleID,
		Name:          "Tea gift set",
		PriceCents:    9900,
		Stock:         200,
		Unsold:        200,
		PurchaseLimit: 1,
		StartAt:       time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC),
		EndAt:         time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC),
		Version:       1,
		CreatedAt:     time.Date(2029, 12, 1, 0, 0, 0, 0, time.UTC),
	}
}

type env struct {
	t        testing.TB
	srv      *Server
	h        http.Handler
	sales    *fakestore.Sales
	stock    *fakestore.Stock
	reserver *fakeReserver
	clock    *clock
	reg      *prometheus.Registry
	logs     *servicetest.Buffer
	created  []*seckill.Sale // seen by OnSaleCreated
	mu       sync.Mutex
}

// newEnv builds a Server over fresh fakes; mod may adjust the Config.
func newEnv(t testing.TB, mod ...func(*Config)) *env {
	t.Helper()
	e := &env{
		t:        t,
		sales:    fakestore.NewSales(),
		stock:    fakestore.NewStock(),
		reserver: &fakeReserver{},
		clock:    &clock{},
		reg:      prometheus.NewRegistry(),
		logs:     &servicetest.Buffer{},
	}
	e.clock.Set(t0)
	e.sales.Now = e.clock.Now
	cfg := Config{
		Sales:      e.sales,
		Stock:      e.stock,
		Reserver:   e.reserver,
		Verifier:   jwt.NewVerifier(testSecret),
		AdminToken: testAdminToken,
		Now:        e.clock.Now,
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: e.reg,
		Gatherer:   e.reg,
		OnSaleCreated: func(s *seckill.Sale) {
			e.mu.Lock()
			e.created = append(e.created, s)
			e.mu.Unlock()
		},
	}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.srv, e.h = srv, srv.Handler()
	return e
}

func buyerToken(t testing.TB, user string) string {
	t.Helper()
	tok, err := jwt.Sign(testSecret, user, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// req is one request to send; the zero values mean no header / no body.
type req struct {
	method, path string
	body         string
	auth         string // full Authorization header value
	headers      map[string][]string
}

func (e *env) do(r req) *httptest.ResponseRecorder {
	e.t.Helper()
	var body io.Reader = http.NoBody
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.auth != "" {
		hr.Header.Set("Authorization", r.auth)
	}
	for k, vs := range r.headers {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, hr)
	return w
}

func (e *env) reserve(user, saleID, body string, headers map[string][]string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(req{method: "POST", path: "/api/v1/sales/" + saleID + "/reservations", body: body,
		auth: "Bearer " + buyerToken(e.t, user), headers: headers})
}

func admin() string { return "Bearer " + testAdminToken }

// wantError asserts an error answer: the status, the code, and the shape
// {"error":{"code","message"}} with nothing else in it.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	var got map[string]map[string]string
	dec := wantJSON(t, w, status)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("error body %q is not {\"error\":{…}}: %v", w.Body, err)
	}
	inner, ok := got["error"]
	if len(got) != 1 || !ok || len(inner) != 2 {
		t.Fatalf("error body %s: want exactly {\"error\":{\"code\",\"message\"}}", w.Body)
	}
	if inner["code"] != code {
		t.Fatalf("error code = %q, want %q; body %s", inner["code"], code, w.Body)
	}
	if inner["message"] == "" {
		t.Fatalf("error body %s has an empty message", w.Body)
	}
	switch status {
	case http.StatusUnauthorized:
		if h := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
			t.Fatalf("WWW-Authenticate = %q, want a Bearer challenge", h)
		}
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		if w.Header().Get("Retry-After") == "" {
			t.Fatal("no Retry-After header")
		}
	}
}

// wantJSON asserts an answer's status and JSON Content-Type, and returns a
// strict decoder (no unknown fields) of its body.
func wantJSON(t *testing.T, w *httptest.ResponseRecorder, status int) *json.Decoder {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	dec.DisallowUnknownFields()
	return dec
}

// decode unmarshals a success body into v, strictly.
func decode(t *testing.T, w *httptest.ResponseRecorder, status int, v any) {
	t.Helper()
	dec := wantJSON(t, w, status)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", w.Body, err)
	}
}

func newRequest(method, path, body string) *http.Request {
	var r io.Reader = http.NoBody
	if body != "" {
		r = strings.NewReader(body)
	}
	return httptest.NewRequest(method, path, r)
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// scrape returns the /metrics text.
func (e *env) scrape() string {
	e.t.Helper()
	w := e.do(req{method: "GET", path: "/metrics"})
	if w.Code != http.StatusOK {
		e.t.Fatalf("/metrics: status %d", w.Code)
	}
	return w.Body.String()
}

// assertMetric asserts that the exposition has the exact line want.
func assertMetric(t *testing.T, e *env, want string) {
	t.Helper()
	text := e.scrape()
	for _, line := range strings.Split(text, "\n") {
		if line == want {
			return
		}
	}
	t.Fatalf("metrics lack %q; have:\n%s", want, grepLines(text, strings.SplitN(want, "{", 2)[0]))
}

func grepLines(text, prefix string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
