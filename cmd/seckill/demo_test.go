package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/rush"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// runCommand runs the CLI as main would and returns its exit code and
// what it printed.
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// decodeRush reads a rush report printed with --json.
func decodeRush(t *testing.T, stdout string) *rush.Report {
	t.Helper()
	var rep rush.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout)
	}
	return &rep
}

// checkRushInvariants asserts what every healthy rush must show: every
// buyer answered, no 5xx, exactly the stock claimed (more buyers than
// stock), every claim an order, nothing oversold.
func checkRushInvariants(t *testing.T, rep *rush.Report, stock, buyers int) {
	t.Helper()
	if rep.Answered != int64(buyers) || rep.Unanswered != 0 {
		t.Errorf("answered %d of %d buyers (%d unanswered)", rep.Answered, buyers, rep.Unanswered)
	}
	if rep.Server5xx != 0 {
		t.Errorf("%d answers were 5xx: %v", rep.Server5xx, rep.Outcomes)
	}
	if rep.Claimed != int64(stock) || rep.Outcomes["202 claimed"] != int64(stock) {
		t.Errorf("claimed %d (outcomes %v), want exactly the %d units", rep.Claimed, rep.Outcomes, stock)
	}
	if got := rep.Outcomes["409 sold_out"]; got != int64(buyers-stock) {
		t.Errorf("%d sold_out answers, want %d (outcomes %v)", got, buyers-stock, rep.Outcomes)
	}
	if rep.Oversold != 0 || rep.ClaimedWithoutOrder != 0 || !rep.OK {
		t.Errorf("oversold %d, claimed without an order %d, ok %v", rep.Oversold, rep.ClaimedWithoutOrder, rep.OK)
	}
	if rep.OrdersPersisted != int64(stock) || rep.OrdersFailed != 0 || rep.OrdersStillPending != 0 {
		t.Errorf("orders: %d persisted, %d failed, %d pending; want %d persisted", rep.OrdersPersisted, rep.OrdersFailed, rep.OrdersStillPending, stock)
	}
	if !rep.SoldOut || rep.SoldOutMS <= 0 || rep.AllPersistedMS <= 0 {
		t.Errorf("sold out %v after %vms, all persisted after %vms", rep.SoldOut, rep.SoldOutMS, rep.AllPersistedMS)
	}
	if rep.RemainingPublic != 0 || rep.UnsoldDatabase != 0 {
		t.Errorf("after the rush Redis shows %d left and the database %d unsold, want 0 and 0", rep.RemainingPublic, rep.UnsoldDatabase)
	}
	if rep.Latency.Count < int64(buyers) || rep.TimeToAnswer.Count != int64(buyers) {
		t.Errorf("latency of %d requests, time to answer of %d buyers; want at least %d and exactly %d",
			rep.Latency.Count, rep.TimeToAnswer.Count, buyers, buyers)
	}
	if rep.Reconciliation.Available && (rep.Reconciliation.Oversold != 0 || !rep.Reconciliation.Balanced) {
		t.Errorf("reconciliation: oversold %d, balanced %v", rep.Reconciliation.Oversold, rep.Reconciliation.Balanced)
	}
}

// TestDemo is the demo with small numbers, on the embedded default: 1,000
// buyers for 50 units.
func TestDemo(t *testing.T) {
	const stock, buyers = 50, 1000
	code, stdout, stderr := runCommand(t, "demo", "--stock", fmt.Sprint(stock), "--buyers", fmt.Sprint(buyers),
		"--concurrency", "64", "--lead", "2s", "--json")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	rep := decodeRush(t, stdout)
	checkRushInvariants(t, rep, stock, buyers)
	if rep.Stock != stock || rep.Buyers != buyers || rep.Concurrency != 64 || rep.Limit != 1 {
		t.Errorf("report of %+v, not of the flags given", rep)
	}
	// stderr is not a terminal here: plain progress lines, no \r.
	if strings.Contains(stderr, "\r") || !strings.Contains(stderr, fmt.Sprintf("sold %d/%d", stock, stock)) {
		t.Errorf("progress on a non-terminal:\n%q", stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("answered %s/%s", loadgen.Thousands(buyers), loadgen.Thousands(buyers))) {
		t.Errorf("the last progress line does not show every buyer answered:\n%s", stderr)
	}
}

// TestDemoTextReport: the human report names every figure the issue asks
// for, and the limit flag reaches the sale.
func TestDemoTextReport(t *testing.T) {
	code, stdout, stderr := runCommand(t, "demo", "--stock", "5", "--buyers", "100", "--concurrency", "16", "--limit", "2",
		"--idempotency-keys", "--lead", "1s")
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"100 buyers, 5 units (limit 2 per buyer), 16 connections, an Idempotency-Key each",
		"sold out after", "every order persisted", "202 claimed 5", "409 sold_out 95",
		"p50", "p90", "p99", "p99.9", "oversold                0  ok", "claimed without order   0  ok",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--stock", "0"}, {"demo", "--buyers", "-1"}, {"demo", "--concurrency", "0"}, {"demo", "--nope"},
	} {
		if code, _, _ := runCommand(t, args...); code == 0 {
			t.Errorf("%v exited 0", args)
		}
	}
}

// fakeNode is an API node that breaks the promises on demand, to prove the
// rush's judgement: overselling claims every request; losing never turns
// a claim into an order.
type fakeNode struct {
	oversell, lose bool
	claims         atomic.Int64
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/admin/v1/sales":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{}`)
	case strings.HasSuffix(r.URL.Path, "/preheat"):
		fmt.Fprint(w, `{"preheated":true}`)
	case strings.HasSuffix(r.URL.Path, "/reservations"):
		n := f.claims.Add(1)
		if !f.oversell && n > 3 {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":{"code":"sold_out","message":"gone"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"reservation_id":"fake.%026d","status":"pending"}`, n)
	case strings.HasPrefix(r.URL.Path, "/api/v1/reservations/"):
		if f.lose {
			fmt.Fprint(w, `{"status":"pending"}`)
			return
		}
		fmt.Fprint(w, `{"status":"ordered"}`)
	case strings.HasPrefix(r.URL.Path, "/api/v1/sales/"):
		fmt.Fprint(w, `{"remaining":0}`)
	case strings.HasSuffix(r.URL.Path, "/reconciliation"):
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"no"}}`)
	case strings.HasPrefix(r.URL.Path, "/admin/v1/sales/"):
		fmt.Fprint(w, `{"unsold":0}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestRushExitsNonZeroWhenAPromiseBreaks: a node that oversells, and one
// that loses claims, each make `bench rush` fail and say why.
func TestRushExitsNonZeroWhenAPromiseBreaks(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *fakeNode
		want func(*rush.Report) bool
	}{
		{"oversell", &fakeNode{oversell: true}, func(r *rush.Report) bool { return r.Oversold == 20-3 && r.ClaimedWithoutOrder == 0 }},
		{"lost claims", &fakeNode{lose: true}, func(r *rush.Report) bool { return r.Oversold == 0 && r.ClaimedWithoutOrder == 3 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.node)
			defer srv.Close()
			code, stdout, stderr := runCommand(t, "bench", "rush", "--url", srv.URL, "--admin-token", "a", "--jwt-secret",
				"test-jwt-secret-0123456789abcdef", "--stock", "3", "--buyers", "20", "--concurrency", "4", "--lead", "200ms",
				"--order-timeout", "1s", "--poll-interval", "20ms", "--json")
			if code == 0 {
				t.Fatalf("exited 0 on a broken promise:\n%s", stdout)
			}
			rep := decodeRush(t, stdout)
			if rep.OK || !tt.want(rep) {
				t.Errorf("report: ok %v, oversold %d, claimed without order %d", rep.OK, rep.Oversold, rep.ClaimedWithoutOrder)
			}
			if !strings.Contains(stderr, "promise broken") {
				t.Errorf("stderr does not say why:\n%s", stderr)
			}
			if rep.Reconciliation.Available || rep.Reconciliation.Status != http.StatusNotFound {
				t.Errorf("a 404 from the reconciliation endpoint must read as not available: %+v", rep.Reconciliation)
			}
		})
	}
}

// TestBenchRushSpreadsOverNodes: two engines on the same real Redis and
// database; the rush spreads its buyers over both and every promise holds.
func TestBenchRushSpreadsOverNodes(t *testing.T) {
	backends := realBackends(t)
	a := startEngine(t, backends)
	b := startEngine(t, backends)
	const stock, buyers = 40, 800
	code, stdout, stderr := runCommand(t, "bench", "rush", "--url", a.base, "--url", b.base,
		"--admin-token", a.m.Config.AdminToken, "--jwt-secret", a.m.Config.JWTSecret,
		"--stock", fmt.Sprint(stock), "--buyers", fmt.Sprint(buyers), "--concurrency", "32", "--lead", "1s", "--json")
	if code != 0 {
		t.Fatalf("bench rush exited %d\n%s\n%s", code, stdout, stderr)
	}
	rep := decodeRush(t, stdout)
	checkRushInvariants(t, rep, stock, buyers)
	if len(rep.URLs) != 2 {
		t.Errorf("report names %v, want both nodes", rep.URLs)
	}
	if code, _, _ := runCommand(t, "bench", "rush", "--url", a.base); code == 0 {
		t.Error("bench rush without the secrets exited 0")
	}
}

// TestBenchRushWithALeadLongerThanTheHeaderTimeout: a rehearsal whose
// lead outlasts the server's header timeout (shortened here to 200ms; 5 s
// in production) answers every buyer: connections the server closed
// while they waited are dialled again before anything is sent, and no
// buyer is reported unanswered or as the client's failure.
func TestBenchRushWithALeadLongerThanTheHeaderTimeout(t *testing.T) {
	const headerTimeout = 200 * time.Millisecond
	var opened atomic.Int64
	e := startEngine(t, nil, func(m *Main) {
		m.tuneServer = func(s *http.Server) {
			s.ReadHeaderTimeout = headerTimeout
			s.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					opened.Add(1)
				}
			}
		}
	})
	const stock, buyers, conns = 10, 300, 24
	code, stdout, stderr := runCommand(t, "bench", "rush", "--url", e.base,
		"--admin-token", e.m.Config.AdminToken, "--jwt-secret", e.m.Config.JWTSecret,
		"--stock", fmt.Sprint(stock), "--buyers", fmt.Sprint(buyers), "--concurrency", fmt.Sprint(conns),
		"--lead", (8 * headerTimeout).String(), "--json")
	if code != 0 {
		t.Fatalf("bench rush exited %d\n%s\n%s", code, stdout, stderr)
	}
	rep := decodeRush(t, stdout)
	checkRushInvariants(t, rep, stock, buyers)
	if rep.ClientFailures != 0 {
		t.Errorf("%d buyers never sent, want every one sent and answered", rep.ClientFailures)
	}
	// The scenario happened: the server closed the connections opened
	// ahead of the start, and they were dialled again.
	if got := opened.Load(); got < 2*conns {
		t.Errorf("the engine saw %d connections, want at least %d: each buyer connection closed while idle and dialled again", got, 2*conns)
	}
}

// TestDemoServe: with --serve the engine stays up after the rush, its
// control room answering, until the context ends.
func TestDemoServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr servicetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--serve", "--stock", "5", "--buyers", "50", "--concurrency", "8", "--lead", "200ms"}, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`still serving on (http://[0-9.:]+)`)
	var base string
	if !servicetest.Eventually(2*time.Minute, func() bool {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
		return base != ""
	}) {
		t.Fatalf("demo --serve never said it was still serving:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "control room: http://") {
		t.Fatalf("demo did not print the control room's URL:\n%s", stderr.String())
	}
	resp, err := http.Get(base + "/admin")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("control room after the rush: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case code := <-done:
		t.Fatalf("demo --serve exited (%d) before it was stopped", code)
	default:
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("demo --serve exited %d:\n%s", code, stderr.String())
	}
}

// TestDemoIgnoresProductionEnv: on a host whose environment configures a
// production serve, demo takes none of its secrets, data dir, backends,
// identity provider or public address, unless the flag is given; a
// loopback address and the other settings still come from the
// environment.
func TestDemoIgnoresProductionEnv(t *testing.T) {
	prod := map[string]string{
		"SECKILL_JWT_SECRET":             "production-jwt-secret-0123456789abcdef",
		"SECKILL_ADMIN_TOKEN":            "production-admin-token-0123456789abcdef",
		"SECKILL_DATA_DIR":               "/var/lib/seckill",
		"SECKILL_REDIS_URL":              "redis://10.0.0.7:6379",
		"SECKILL_DATABASE_URL":           "postgres://seckill@10.0.0.8/seckill",
		"SECKILL_BROKER_URL":             "amqp://10.0.0.9:5672",
		"SECKILL_JWT_JWKS_URL":           "https://login.example.com/.well-known/jwks.json",
		"SECKILL_JWT_ISSUER":             "https://login.example.com",
		"SECKILL_JWT_AUDIENCE":           "seckill-shop",
		"SECKILL_HTTP_ADDR":              "0.0.0.0:8080",
		"SECKILL_PAYMENT_WEBHOOK_SECRET": "production-webhook-secret-0123456789abcdef",
		"SECKILL_SERVICE_TOKEN":          "production-service-token-0123456789abcdef",
		"SECKILL_PAY_TIMEOUT":            "7m", // not a production secret: still read
		"SECKILL_ORDER_WRITERS":          "3",
	}
	for k, v := range prod {
		t.Setenv(k, v)
	}
	var warn bytes.Buffer
	cfg, _, _, _, err := demoSettings(nil, &warn)
	if err != nil {
		t.Fatal(err)
	}
	d := demoConfig()
	for name, got := range map[string][2]string{
		"jwt secret":     {cfg.JWTSecret, d.JWTSecret},
		"admin token":    {cfg.AdminToken, d.AdminToken},
		"data dir":       {cfg.DataDir, d.DataDir},
		"redis":          {cfg.RedisURL, d.RedisURL},
		"database":       {cfg.DatabaseURL, d.DatabaseURL},
		"broker":         {cfg.BrokerURL, d.BrokerURL},
		"jwks":           {cfg.JWTJWKSURL, d.JWTJWKSURL},
		"issuer":         {cfg.JWTIssuer, d.JWTIssuer},
		"audience":       {cfg.JWTAudience, d.JWTAudience},
		"http address":   {cfg.HTTPAddr, d.HTTPAddr},
		"webhook secret": {cfg.PaymentWebhookSecret, d.PaymentWebhookSecret},
		"service token":  {cfg.ServiceToken, d.ServiceToken},
	} {
		if got[0] != got[1] {
			t.Errorf("demo took the %s %q from the environment, want its own %q", name, got[0], got[1])
		}
	}
	if cfg.PayTimeout != 7*time.Minute || cfg.OrderWriters != 3 {
		t.Errorf("other settings lost their environment values: pay timeout %s, writers %d", cfg.PayTimeout, cfg.OrderWriters)
	}
	if !strings.Contains(warn.String(), "ignoring $SECKILL_JWT_SECRET") || strings.Contains(warn.String(), prod["SECKILL_JWT_SECRET"]) {
		t.Errorf("warnings: %q; want the variable named, its value not shown", warn.String())
	}

	// With the flags, the values are used; a loopback address is taken
	// from the environment.
	t.Setenv("SECKILL_HTTP_ADDR", "127.0.0.1:9099")
	cfg, _, _, _, err = demoSettings([]string{"--jwt-secret", prod["SECKILL_JWT_SECRET"], "--redis-url", prod["SECKILL_REDIS_URL"],
		"--data-dir", "/tmp/demo-data"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JWTSecret != prod["SECKILL_JWT_SECRET"] || cfg.RedisURL != prod["SECKILL_REDIS_URL"] || cfg.DataDir != "/tmp/demo-data" || cfg.HTTPAddr != "127.0.0.1:9099" {
		t.Errorf("flags or loopback address not taken: %+v", cfg)
	}
	if cfg.AdminToken != d.AdminToken {
		t.Errorf("admin token %q taken from the environment without its flag", cfg.AdminToken)
	}
}
