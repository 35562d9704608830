package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"iter"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/secrets"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// engine is one running Main for a test, with an HTTP client that can hold
// many connections at once.
type engine struct {
	t      testing.TB
	m      *Main
	base   string
	client *http.Client
	out    *bytes.Buffer
}

// startEngine runs Main with cfg adjusted for a test: a free port, a
// temporary data dir, fixed secrets, quiet logs. hooks adjust Main itself
// before it runs.
func startEngine(t testing.TB, mutate func(*Config), hooks ...func(*Main)) *engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.JWTSecret = "test-jwt-secret-0123456789abcdef"
	cfg.AdminToken = "test-admin-token-0123456789abcdef"
	cfg.ShutdownTimeout = 10 * time.Second
	// A stampede under the race detector on a shared machine keeps some
	// requests waiting longer than production's budget; these tests count
	// claims, so they give every request time. The budgets have tests of
	// their own (outage_test.go), with their own settings.
	cfg.RequestBudget = 30 * time.Second
	// Except a lottery entry's: a draw reads the entries two of its
	// budgets after closing them (seckill.EntriesSettled), and these
	// tests' entrants are few.
	cfg.RouteBudgets = "enter=3s"
	// Every test buyer comes from 127.0.0.1; the limits have tests of their own.
	cfg.RateLimitIP, cfg.RateLimitUser = "off", "off"
	cfg.DatabaseMaxConns = sqltest.MaxConns
	if mutate != nil {
		mutate(&cfg)
	}
	out := &bytes.Buffer{}
	logger, err := newLogger(io.Discard, "error")
	if err != nil {
		t.Fatal(err)
	}
	m := &Main{Config: cfg, Stdout: out, Logger: logger}
	for _, h := range hooks {
		h(m)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, MaxConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &engine{t: t, m: m, base: "http://" + m.Addr(), client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, out: out}
}

// parseServe is the configuration serve's flags and $SECKILL_* variables
// give args.
func parseServe(t *testing.T, args ...string) Config {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := DefaultConfig()
	if err := c.register(fs); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

// realBackends points the engine at the shared Redis and a fresh MariaDB
// database.
func realBackends(t testing.TB) func(*Config) {
	redisURL, prefix := servicetest.Redis.URL(t), servicetest.UniqueName("sk")
	dbURL := sqltest.MySQL(t)
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) }) // after the engine closes
	return func(c *Config) { c.RedisURL, c.DatabaseURL, c.RedisKeyPrefix = redisURL, dbURL, prefix }
}

// fanOut calls do with each of items, from workers goroutines at once, and
// returns when every call has.
func fanOut[T any](workers int, items iter.Seq[T], do func(T)) {
	ch := make(chan T)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range ch {
				do(it)
			}
		})
	}
	for it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
}

type reply struct {
	status int
	body   map[string]any
	header http.Header
}

func (r reply) code() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (e *engine) do(method, path, auth string, body any, header ...string) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, _ := json.Marshal(b)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			e.t.Errorf("%s %s: bad JSON %q: %v", method, path, raw, err)
		}
	}
	return r
}

func (e *engine) admin(method, path string, body any) reply {
	e.t.Helper()
	return e.do(method, path, e.m.Config.AdminToken, body)
}

func (e *engine) token(user string) string {
	e.t.Helper()
	tok, err := jwt.Sign([]byte(e.m.Config.JWTSecret), user, time.Hour, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// createSale creates a sale through the admin API and fails the test
// unless it is answered 201.
func (e *engine) createSale(stock, limit int64, start, end time.Time) string {
	e.t.Helper()
	id := servicetest.UniqueName("t")
	r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": id, "name": "Tea gift set", "price_cents": 9900, "stock": stock,
		"per_user_limit": limit, "start_at": start.Format(time.RFC3339Nano), "end_at": end.Format(time.RFC3339Nano),
	})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create sale: %d %v", r.status, r.body)
	}
	return id
}

// liveSale creates a sale that started a second ago and is preheated.
func (e *engine) liveSale(stock, limit int64) string {
	e.t.Helper()
	now := time.Now()
	return e.createSale(stock, limit, now.Add(-time.Second), now.Add(time.Hour))
}

func (e *engine) reserve(sale, tok string, qty any, key string) reply {
	e.t.Helper()
	var hdr []string
	if key != "" {
		hdr = []string{"Idempotency-Key", key}
	}
	return e.do("POST", "/api/v1/sales/"+sale+"/reservations", tok, map[string]any{"qty": qty}, hdr...)
}

func (e *engine) stock(sale string) seckill.StockLevel {
	e.t.Helper()
	lvl, err := e.m.stock.StockStore().Stock(context.Background(), sale)
	if err != nil {
		e.t.Fatalf("stock of %s: %v", sale, err)
	}
	return lvl
}

// TestStampede is the first promise on real Redis: 5,000 buyers at once on
// 200 units with a limit of 1 each.
func TestStampede(t *testing.T) {
	e := startEngine(t, realBackends(t))
	sale := e.liveSale(200, 1)

	const buyers = 5000
	statuses, winners := e.rush(sale, buyers, "buyer")
	t.Logf("outcomes: %v", statuses)
	if got := statuses["202 "]; got != 200 || len(winners) != 200 {
		t.Errorf("got %d reservations (%d distinct ids), want exactly 200", got, len(winners))
	}
	if got := statuses["409 sold_out"]; got != buyers-200 {
		t.Errorf("got %d sold_out, want %d", got, buyers-200)
	}
	// One token per buyer: a buyer holding two reservations would show as
	// one token behind two ids.
	holders := map[string]bool{}
	for _, tok := range winners {
		if holders[tok] {
			t.Errorf("a buyer holds two reservations")
		}
		holders[tok] = true
	}
	if lvl := e.stock(sale); lvl.Reserved != 200 || lvl.Total != 200 {
		t.Errorf("stock store shows %+v, want 200 of 200 reserved", lvl)
	}
	r := e.do("GET", "/api/v1/sales/"+sale, "", nil)
	if r.body["remaining"] != float64(0) || r.body["state"] != "sold_out" {
		t.Errorf("public sale after sell-out: %v", r.body)
	}
}

// TestOneBuyerManyTries: concurrent tries by one buyer get one unit.
func TestOneBuyerManyTries(t *testing.T) {
	e := startEngine(t, realBackends(t))

	t.Run("same idempotency key 50 times", func(t *testing.T) {
		sale := e.liveSale(10, 3)
		tok := e.token("retrier")
		ids := make(chan string, 50)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				r := e.reserve(sale, tok, 1, "click-1")
				if r.status != http.StatusAccepted {
					t.Errorf("retry answered %d %v, want the same 202", r.status, r.body)
				}
				id, _ := r.body["reservation_id"].(string)
				ids <- id
			})
		}
		wg.Wait()
		close(ids)
		distinct := map[string]bool{}
		for id := range ids {
			distinct[id] = true
		}
		if len(distinct) != 1 {
			t.Errorf("50 retries of one key got %d reservation ids, want 1", len(distinct))
		}
		if lvl := e.stock(sale); lvl.Reserved != 1 {
			t.Errorf("reserved %d units, want 1", lvl.Reserved)
		}
		if r := e.reserve(sale, tok, 2, "click-1"); r.status != 422 || r.code() != "idempotency_key_reused" {
			t.Errorf("same key, other qty: %d %v", r.status, r.body)
		}
	})

	t.Run("no key, limit 1, 20 at once", func(t *testing.T) {
		sale := e.liveSale(10, 1)
		tok := e.token("double-clicker")
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				r := e.reserve(sale, tok, 1, "")
				mu.Lock()
				codes[r.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if codes[202] != 1 || codes[409] != 19 {
			t.Errorf("got %v, want one 202 and 19 409 limit_exceeded", codes)
		}
		if lvl := e.stock(sale); lvl.Reserved != 1 {
			t.Errorf("reserved %d, want 1", lvl.Reserved)
		}
	})
}

// TestReservationCodes: every refusal of the API table, on real backends.
func TestReservationCodes(t *testing.T) {
	e := startEngine(t, realBackends(t))
	now := time.Now()
	live := e.liveSale(5, 2)
	future := e.createSale(5, 2, now.Add(time.Hour), now.Add(2*time.Hour))
	past := e.createSale(5, 2, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if r := e.admin("POST", "/admin/v1/sales/"+past+"/preheat", nil); r.status != 200 {
		t.Fatalf("preheat an ended sale on demand: %d %v", r.status, r.body)
	}
	tok := e.token("codes")

	tests := []struct {
		name       string
		sale       string
		qty        any
		wantStatus int
		wantCode   string
	}{
		{"qty over the limit", live, 3, 409, "limit_exceeded"},
		{"qty zero", live, 0, 400, "invalid_request"},
		{"qty negative", live, -1, 400, "invalid_request"},
		{"qty not a number", live, "1", 400, "invalid_request"},
		{"qty fractional", live, 1.5, 400, "invalid_request"},
		{"unknown sale", "no-such-sale", 1, 404, "sale_not_found"},
		{"before the start", future, 1, 409, "not_started"},
		{"after the end", past, 1, 409, "ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.reserve(tt.sale, tok, tt.qty, "")
			if r.status != tt.wantStatus || r.code() != tt.wantCode {
				t.Errorf("got %d %q, want %d %q (body %v)", r.status, r.code(), tt.wantStatus, tt.wantCode, r.body)
			}
		})
	}
	if lvl := e.stock(live); lvl.Reserved != 0 {
		t.Errorf("refused requests reserved %d units", lvl.Reserved)
	}
	// The limit is cumulative: 2 then 1 more is refused.
	if r := e.reserve(live, tok, 2, ""); r.status != 202 {
		t.Fatalf("qty 2 within limit 2: %d %v", r.status, r.body)
	}
	if r := e.reserve(live, tok, 1, ""); r.code() != "limit_exceeded" {
		t.Errorf("third unit past limit 2: %d %v", r.status, r.body)
	}
}

// TestPreheatNeverResetsALiveSale: preheating twice mid-sale changes nothing.
func TestPreheatNeverResetsALiveSale(t *testing.T) {
	e := startEngine(t, realBackends(t))
	sale := e.liveSale(10, 1)
	for i := range 4 {
		if r := e.reserve(sale, e.token(fmt.Sprint("p", i)), 1, ""); r.status != 202 {
			t.Fatalf("reserve: %d %v", r.status, r.body)
		}
	}
	for range 2 {
		r := e.admin("POST", "/admin/v1/sales/"+sale+"/preheat", nil)
		if r.status != 200 || r.body["created"] != false {
			t.Fatalf("preheat of a live sale: %d %v, want 200 created=false", r.status, r.body)
		}
	}
	if lvl := e.stock(sale); lvl.Reserved != 4 || lvl.Total != 10 {
		t.Fatalf("after preheat twice: %+v, want 4 of 10 reserved", lvl)
	}
	// The buyers' limits survived too.
	if r := e.reserve(sale, e.token("p0"), 1, ""); r.code() != "limit_exceeded" {
		t.Fatalf("buyer p0 again after preheat: %d %v, want limit_exceeded", r.status, r.body)
	}
}

// TestBadInputChangesNothing: hostile requests on the real stack get the
// error shape and reserve nothing.
func TestBadInputChangesNothing(t *testing.T) {
	e := startEngine(t, realBackends(t))
	sale := e.liveSale(10, 5)
	good := e.token("honest")
	expired, _ := jwt.Sign([]byte(e.m.Config.JWTSecret), "late", time.Minute, time.Now().Add(-time.Hour))
	forged, _ := jwt.Sign([]byte("another-secret-entirely-000000000"), "mallory", time.Hour, time.Now())
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJldmUiLCJleHAiOjQxMDI0NDQ4MDB9."
	path := "/api/v1/sales/" + sale + "/reservations"

	tests := []struct {
		name       string
		tok        string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"malformed JSON", good, `{"qty":`, 400, "invalid_request"},
		{"unknown field", good, `{"qty":1,"price":0}`, 400, "invalid_request"},
		{"wrong type", good, `{"qty":"one"}`, 400, "invalid_request"},
		{"trailing data", good, `{"qty":1}{"qty":1}`, 400, "invalid_request"},
		{"body over 8 KiB", good, `{"qty":1,"pad":"` + strings.Repeat("x", 9<<10) + `"}`, 413, "body_too_large"},
		{"no token", "", `{"qty":1}`, 401, "unauthorized"},
		{"forged token", forged, `{"qty":1}`, 401, "unauthorized"},
		{"expired token", expired, `{"qty":1}`, 401, "unauthorized"},
		{"alg none", none, `{"qty":1}`, 401, "unauthorized"},
		{"admin token as buyer", e.m.Config.AdminToken, `{"qty":1}`, 401, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", path, tt.tok, tt.body)
			if r.status != tt.wantStatus || r.code() != tt.wantCode {
				t.Errorf("got %d %q, want %d %q", r.status, r.code(), tt.wantStatus, tt.wantCode)
			}
			if msg, _ := r.body["error"].(map[string]any)["message"].(string); msg == "" {
				t.Errorf("error without a message: %v", r.body)
			}
		})
	}
	if r := e.do("POST", "/admin/v1/sales", good, `{}`); r.status != 401 {
		t.Errorf("buyer token on an admin route: %d", r.status)
	}
	if lvl := e.stock(sale); lvl.Reserved != 0 {
		t.Fatalf("bad requests reserved %d units", lvl.Reserved)
	}
}

// TestEmbeddedDefault: no services, no secrets configured: the engine
// generates and keeps its secrets and answers the API.
func TestEmbeddedDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := startEngine(t, func(c *Config) { c.DataDir = dir; c.JWTSecret = ""; c.AdminToken = "" })
	if !strings.Contains(first.out.String(), "generated secrets in "+filepath.Join(dir, secrets.File)) {
		t.Fatalf("banner does not name the generated secrets' file:\n%s", first.out)
	}
	if strings.Contains(first.out.String(), first.m.Config.AdminToken) || strings.Contains(first.out.String(), first.m.Config.JWTSecret) {
		t.Fatalf("banner prints a generated secret:\n%s", first.out)
	}
	sale := first.liveSale(3, 1)
	if r := first.reserve(sale, first.token("alice"), 1, "k"); r.status != 202 {
		t.Fatalf("reserve on the embedded default: %d %v", r.status, r.body)
	}
	if r := first.do("GET", "/api/v1/sales/"+sale, "", nil); r.body["remaining"] != float64(2) {
		t.Fatalf("public sale: %v", r.body)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := first.do("GET", p, "", nil); r.status != 200 {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	secret, admin := first.m.Config.JWTSecret, first.m.Config.AdminToken
	if err := first.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startEngine(t, func(c *Config) { c.DataDir = dir; c.JWTSecret = ""; c.AdminToken = "" })
	if second.m.Config.JWTSecret != secret || second.m.Config.AdminToken != admin {
		t.Fatal("a restart generated new secrets instead of reusing the kept ones")
	}
	if !strings.Contains(second.out.String(), "using the secrets") || strings.Contains(second.out.String(), admin) || strings.Contains(second.out.String(), secret) {
		t.Fatalf("banner on restart must name the file, not show the secrets:\n%s", second.out)
	}
	if r := second.admin("GET", "/admin/v1/sales/"+sale, nil); r.status != 200 {
		t.Fatalf("the sale did not survive a restart: %d %v", r.status, r.body)
	}
}

func TestTokenAndMigrateCommands(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"token", "--user", "bob", "--data-dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("token exited %d: %s", code, errOut.String())
	}
	s, _, err := secrets.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	user, err := jwt.NewVerifier([]byte(s.JWTSecret)).Verify(strings.TrimSpace(out.String()))
	if err != nil || user != "bob" {
		t.Fatalf("printed token verifies as %q, %v", user, err)
	}
	if code := run(context.Background(), []string{"token", "--data-dir", dir}, &out, &errOut); code == 0 {
		t.Fatal("token without --user succeeded")
	}

	out.Reset()
	url := "sqlite:" + filepath.Join(dir, "m.db")
	for range 2 {
		if code := run(context.Background(), []string{"migrate", "--database-url", url}, &out, &errOut); code != 0 {
			t.Fatalf("migrate exited %d: %s", code, errOut.String())
		}
	}
	if !strings.Contains(out.String(), "up to date") {
		t.Fatalf("migrate printed %q", out.String())
	}
	if code := run(context.Background(), []string{"nope"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command exited %d, want 2", code)
	}
}
