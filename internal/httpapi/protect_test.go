package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/soldout"
)

// embeddedLimiter is the production limiter (the Redis script) on an
// in-process miniredis, counting its calls.
func embeddedLimiter(t testing.TB) *countingLimiter {
	t.Helper()
	s, err := redis.StartEmbedded(context.Background(), redis.WithKeyPrefix(servicetest.UniqueName("t")))
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(s.Close)
	return &countingLimiter{next: s.RateLimiter()}
}

type countingLimiter struct {
	next  seckill.RateLimiter
	calls atomic.Int64
}

func (l *countingLimiter) Allow(ctx context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error) {
	l.calls.Add(1)
	return l.next.Allow(ctx, key, limit)
}

// limiterFunc is a scripted limiter.
type limiterFunc func(ctx context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error)

func (f limiterFunc) Allow(ctx context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error) {
	return f(ctx, key, limit)
}

// from sends a reservation as user from the peer remoteAddr, with
// optional X-Forwarded-For values.
func (e *env) from(remoteAddr, user, body string, xff ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", body)
	r.RemoteAddr = remoteAddr
	r.Header.Set("Authorization", "Bearer "+buyerToken(e.t, user))
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return serve(e.h, r)
}

// tally counts answers by status and checks every 429 on the way: the
// error shape and a Retry-After of whole seconds within (0, max].
func tally(t *testing.T, answers []*httptest.ResponseRecorder, maxRetry int) map[int]int {
	t.Helper()
	got := map[int]int{}
	for _, w := range answers {
		got[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			wantError(t, w, http.StatusTooManyRequests, seckill.ERATELIMITED)
			n, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil || n < 1 || n > maxRetry {
				t.Fatalf("Retry-After = %q; want whole seconds from 1 to %d", w.Header().Get("Retry-After"), maxRetry)
			}
		}
	}
	return got
}

// TestRateLimitIPOneClient: one address firing 100 requests at the default
// 20/minute gets exactly 20 through; the other 80 are 429 with a sane
// Retry-After, reach no stock logic, and after the first refusal cost no
// Redis call.
func TestRateLimitIPOneClient(t *testing.T) {
	limiter := embeddedLimiter(t)
	e := newEnv(t, func(c *Config) { c.RateLimiter, c.RateLimitIP = limiter, DefaultRateLimitIP })
	var answers []*httptest.ResponseRecorder
	for i := range 100 {
		// A fresh user each time: only the IP limit can refuse.
		answers = append(answers, e.from("198.51.100.7:40000", "buyer-"+strconv.Itoa(i), `{"qty":1}`))
	}
	got := tally(t, answers, 60)
	t.Logf("100 requests from one IP at %s: %d × 202, %d × 429", DefaultRateLimitIP, got[202], got[429])
	if got[http.StatusAccepted] != 20 || got[http.StatusTooManyRequests] != 80 || len(got) != 2 {
		t.Fatalf("answers by status %v; want 20 × 202 and 80 × 429", got)
	}
	if n := e.reserver.count(); n != 20 {
		t.Fatalf("reserver calls = %d; want 20 (refused requests must not reach stock logic)", n)
	}
	if n := limiter.calls.Load(); n != 21 {
		t.Fatalf("limiter calls = %d; want 21 (20 allowed, 1 refused, the rest answered locally)", n)
	}
	assertMetric(t, e, `seckill_reservations_total{outcome="rate_limited"} 80`)
	assertMetric(t, e, `seckill_rate_limit_refusals_total{decided_by="limiter",limit="ip"} 1`)
	assertMetric(t, e, `seckill_rate_limit_refusals_total{decided_by="local",limit="ip"} 79`)
}

// TestRateLimitIPBehindTrustedProxy: through a trusted proxy, each forwarded
// client has its own count; a client still cannot escape its own by
// writing X-Forwarded-For itself, since only the right-most untrusted
// entry counts.
func TestRateLimitIPBehindTrustedProxy(t *testing.T) {
	proxies, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	mod := func(c *Config) {
		c.RateLimiter, c.RateLimitIP, c.TrustedProxies = embeddedLimiter(t), DefaultRateLimitIP, proxies
	}

	e := newEnv(t, mod)
	var answers []*httptest.ResponseRecorder
	for i := range 100 {
		client := "203.0.113." + strconv.Itoa(i)
		answers = append(answers, e.from("10.1.2.3:5555", "buyer-"+strconv.Itoa(i), `{"qty":1}`, client))
	}
	if got := tally(t, answers, 60); got[http.StatusAccepted] != 100 {
		t.Fatalf("100 distinct forwarded clients: %v; want all 202", got)
	}

	e = newEnv(t, mod)
	answers = nil
	for i := range 100 {
		// The client forges a fresh left-most entry each time; the proxies
		// (192.0.2.1, then 10.9.9.9) append what they saw.
		forged := "198.18.0." + strconv.Itoa(i)
		answers = append(answers, e.from("10.1.2.3:5555", "buyer-"+strconv.Itoa(i), `{"qty":1}`,
			forged+", 203.0.113.50", "192.0.2.1,10.9.9.9"))
	}
	if got := tally(t, answers, 60); got[http.StatusAccepted] != 20 || got[http.StatusTooManyRequests] != 80 {
		t.Fatalf("one forwarded client forging X-Forwarded-For: %v; want 20 × 202, 80 × 429", got)
	}
}

// TestRateLimitIPIgnoresUntrustedForwardedFor: a peer that is not a trusted
// proxy cannot pick its address by sending X-Forwarded-For.
func TestRateLimitIPIgnoresUntrustedForwardedFor(t *testing.T) {
	for name, trusted := range map[string]string{"no proxies trusted": "", "other proxies trusted": "10.0.0.0/8"} {
		t.Run(name, func(t *testing.T) {
			proxies, err := ParseTrustedProxies(trusted)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(c *Config) {
				c.RateLimiter, c.RateLimitIP, c.TrustedProxies = embeddedLimiter(t), DefaultRateLimitIP, proxies
			})
			var answers []*httptest.ResponseRecorder
			for i := range 100 {
				spoofed := "203.0.113." + strconv.Itoa(i)
				answers = append(answers, e.from("198.51.100.9:1234", "buyer-"+strconv.Itoa(i), `{"qty":1}`, spoofed))
			}
			if got := tally(t, answers, 60); got[http.StatusAccepted] != 20 || got[http.StatusTooManyRequests] != 80 {
				t.Fatalf("spoofed X-Forwarded-For from an untrusted peer: %v; want 20 × 202, 80 × 429", got)
			}
		})
	}
}

// TestRateLimitUser: the per-user limit follows the verified buyer across
// addresses, runs before the body is read, and never sees anonymous
// requests.
func TestRateLimitUser(t *testing.T) {
	limiter := embeddedLimiter(t)
	verifier := &countingVerifier{next: jwt.NewVerifier(testSecret)}
	e := newEnv(t, func(c *Config) {
		c.RateLimiter, c.RateLimitUser, c.Verifier = limiter, seckill.RateLimit{Rate: 5, Period: time.Minute}, verifier
	})
	var answers []*httptest.ResponseRecorder
	for i := range 12 {
		answers = append(answers, e.from("203.0.113."+strconv.Itoa(i)+":1", "alice", `{"qty":1}`))
	}
	if got := tally(t, answers, 12); got[http.StatusAccepted] != 5 || got[http.StatusTooManyRequests] != 7 {
		t.Fatalf("alice from 12 addresses: %v; want 5 × 202, 7 × 429", got)
	}
	// Refused before decoding: a malformed body gets 429, not 400.
	wantError(t, e.from("203.0.113.99:1", "alice", `{"qty":`), http.StatusTooManyRequests, seckill.ERATELIMITED)
	// Others are unaffected.
	if w := e.from("203.0.113.1:1", "bob", `{"qty":1}`); w.Code != http.StatusAccepted {
		t.Fatalf("bob: %d %s", w.Code, w.Body)
	}
	// One signature check per request, though both the guard and the
	// handler need the user.
	if n := verifier.calls.Load(); n != 14 {
		t.Fatalf("token verifications = %d for 14 requests; want 14", n)
	}
	calls := limiter.calls.Load()
	r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", `{"qty":1}`)
	wantError(t, serve(e.h, r), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	if limiter.calls.Load() != calls {
		t.Fatal("an anonymous request reached the user limiter")
	}
	assertMetric(t, e, `seckill_reservations_total{outcome="unauthorized"} 1`)
	assertMetric(t, e, `seckill_reservations_total{outcome="rate_limited"} 8`)
}

type countingVerifier struct {
	next  TokenVerifier
	calls atomic.Int64
}

func (v *countingVerifier) Verify(tok string) (string, error) {
	v.calls.Add(1)
	return v.next.Verify(tok)
}

// TestBothLimits: the IP limit runs first, then the user limit.
func TestBothLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.RateLimiter = embeddedLimiter(t)
		c.RateLimitIP = seckill.RateLimit{Rate: 3, Period: time.Minute}
		c.RateLimitUser = seckill.RateLimit{Rate: 2, Period: time.Minute}
	})
	codes := func(ws ...*httptest.ResponseRecorder) (out []int) {
		for _, w := range ws {
			out = append(out, w.Code)
		}
		return out
	}
	got := codes(
		e.from("198.51.100.1:1", "alice", `{"qty":1}`),
		e.from("198.51.100.1:1", "alice", `{"qty":1}`),
		e.from("198.51.100.1:1", "alice", `{"qty":1}`), // user limit
		e.from("198.51.100.1:1", "bob", `{"qty":1}`),   // IP limit (3 counted)
		e.from("198.51.100.2:1", "bob", `{"qty":1}`),
	)
	if want := []int{202, 202, 429, 429, 202}; fmtInts(got) != fmtInts(want) {
		t.Fatalf("statuses %v; want %v", got, want)
	}
}

func fmtInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// TestLimiterFailsOpen: with Redis unreachable requests go through, each
// failure is counted, and the outage is logged once, without secrets.
func TestLimiterFailsOpen(t *testing.T) {
	down := seckill.Errorf(seckill.EUNAVAILABLE, "The stock store is unavailable; retry later.")
	e := newEnv(t, func(c *Config) {
		c.RateLimiter = limiterFunc(func(context.Context, string, seckill.RateLimit) (seckill.RateResult, error) {
			return seckill.RateResult{}, errors.Join(down, errors.New("dial tcp 10.0.0.7:6379: connection refused"))
		})
		c.RateLimitIP, c.RateLimitUser = DefaultRateLimitIP, DefaultRateLimitUser
	})
	tok := buyerToken(t, "alice")
	for range 30 {
		r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", `{"qty":1}`)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Idempotency-Key", "secret-idem-key")
		if w := serve(e.h, r); w.Code != http.StatusAccepted {
			t.Fatalf("status %d with the limiter down; want 202 (fail open)", w.Code)
		}
	}
	assertMetric(t, e, `seckill_rate_limit_errors_total 60`) // IP and user, 30 each
	logs := e.logs.String()
	if strings.Count(logs, "rate limiter failing") != 1 || !strings.Contains(logs, "connection refused") {
		t.Fatalf("logs %q; want one warning naming the cause", logs)
	}
	for _, secret := range []string{tok, testAdminToken, string(testSecret), "secret-idem-key"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a secret reached the log: %q", logs)
		}
	}
}

// TestLimiterTimeoutFailsOpen: a limiter that hangs costs a request at
// most rateLimitTimeout.
func TestLimiterTimeoutFailsOpen(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.RateLimiter = limiterFunc(func(ctx context.Context, _ string, _ seckill.RateLimit) (seckill.RateResult, error) {
			<-ctx.Done()
			return seckill.RateResult{}, ctx.Err()
		})
		c.RateLimitIP = DefaultRateLimitIP
	})
	start := time.Now()
	if w := e.from("198.51.100.1:1", "alice", `{"qty":1}`); w.Code != http.StatusAccepted {
		t.Fatalf("status %d; want 202", w.Code)
	}
	took := time.Since(start)
	if took < rateLimitTimeout {
		t.Fatalf("took %s; want about %s", took, rateLimitTimeout)
	}
	servicetest.WantWithin(t, "the answer", took, rateLimitTimeout+2*time.Second)
}

// TestBlockListLapses: a refused key is answered locally until the
// refusal's retry time, then the limiter is asked again.
func TestBlockListLapses(t *testing.T) {
	var calls atomic.Int64
	e := newEnv(t, func(c *Config) {
		c.RateLimiter = limiterFunc(func(context.Context, string, seckill.RateLimit) (seckill.RateResult, error) {
			calls.Add(1)
			return seckill.RateResult{RetryAfter: 2500 * time.Millisecond}, nil
		})
		c.RateLimitIP = DefaultRateLimitIP // 3 s per request: a 2.5 s refusal is plausible
	})
	w := e.from("198.51.100.1:1", "alice", `{"qty":1}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" {
		t.Fatalf("first: %d, Retry-After %q; want 429, 3", w.Code, w.Header().Get("Retry-After"))
	}
	e.clock.Advance(2 * time.Second)
	w = e.from("198.51.100.1:1", "alice", `{"qty":1}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || calls.Load() != 1 {
		t.Fatalf("2 s later: %d, Retry-After %q, %d limiter calls; want 429, 1, 1", w.Code, w.Header().Get("Retry-After"), calls.Load())
	}
	if w := e.from("198.51.100.2:1", "alice", `{"qty":1}`); calls.Load() != 2 || w.Code != http.StatusTooManyRequests {
		t.Fatalf("another address: %d limiter calls; want 2", calls.Load())
	}
	e.clock.Advance(500 * time.Millisecond)
	e.from("198.51.100.1:1", "alice", `{"qty":1}`)
	if calls.Load() != 3 {
		t.Fatalf("after the refusal's retry time: %d limiter calls; want 3", calls.Load())
	}
	// A clock that jumps back leaves no key blocked for longer than a
	// refusal can last.
	e.clock.Advance(-time.Hour)
	e.from("198.51.100.1:1", "alice", `{"qty":1}`)
	if calls.Load() != 4 {
		t.Fatalf("after the clock went back: %d limiter calls; want 4", calls.Load())
	}
}

func TestBlockListIsBounded(t *testing.T) {
	b := newBlockList()
	now := time.Unix(1_900_000_000, 0)
	for i := range 3 * blockShards * blockShardMax {
		b.put("ip:"+strconv.Itoa(i), now.Add(time.Second), now)
	}
	if n := b.len(); n > blockShards*blockShardMax || n < blockShards*blockShardMax*7/8 {
		t.Fatalf("len = %d; want at most %d, and nearly full", n, blockShards*blockShardMax)
	}
	// The newest key is always remembered, even with every shard full.
	b.put("newest", now.Add(time.Second), now)
	if _, ok := b.get("newest", now, time.Minute); !ok {
		t.Fatal("a full block list did not make room")
	}
	// Once those expire, new keys find room again.
	later := now.Add(2 * time.Second)
	for i := range blockShards * blockShardMax / 2 {
		b.put("user:"+strconv.Itoa(i), later.Add(time.Second), later)
	}
	for i := range 100 {
		if _, ok := b.get("user:"+strconv.Itoa(i), later, time.Minute); !ok {
			t.Fatalf("user:%d not remembered after the old entries expired", i)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "1", time.Nanosecond: "1", time.Second: "1", time.Second + 1: "2",
		2500 * time.Millisecond: "3", time.Minute: "60", -time.Second: "1",
	} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %s; want %s", d, got, want)
		}
	}
}

// TestInFlightCap: with the cap at N and a slow stock store, requests
// beyond N are answered 503 at once, and nothing is reserved for them.
func TestInFlightCap(t *testing.T) {
	const capN = 4
	release := make(chan struct{})
	e := newEnv(t, func(c *Config) { c.MaxInFlight = capN })
	e.reserver.set(func(_ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
		<-release
		return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
	})
	var wg sync.WaitGroup
	slow := make([]*httptest.ResponseRecorder, capN)
	for i := range capN {
		wg.Go(func() { slow[i] = e.from("198.51.100.1:1", "buyer-"+strconv.Itoa(i), `{"qty":1}`) })
	}
	if !servicetest.Eventually(30*time.Second, func() bool { return e.reserver.count() >= capN }) {
		t.Fatalf("only %d requests reached the reserver", e.reserver.count())
	}
	assertMetric(t, e, `seckill_reservations_in_flight 4`)

	start := time.Now()
	for i := range 50 {
		w := e.from("198.51.100.1:1", "late-"+strconv.Itoa(i), `{"qty":1}`)
		wantError(t, w, http.StatusServiceUnavailable, seckill.EOVERLOADED)
		if got := w.Header().Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After = %q; want 1", got)
		}
	}
	servicetest.WantWithin(t, "50 shed requests answered (want at once)", time.Since(start), 2*time.Second)
	if n := e.reserver.count(); n != capN {
		t.Fatalf("reserver calls = %d; want %d (shed requests must reserve nothing)", n, capN)
	}
	close(release)
	wg.Wait()
	for i, w := range slow {
		if w.Code != http.StatusAccepted {
			t.Fatalf("slow request %d: %d; want 202", i, w.Code)
		}
	}
	assertMetric(t, e, `seckill_reservations_in_flight 0`)
	assertMetric(t, e, `seckill_reservations_total{outcome="overloaded"} 50`)
	if w := e.from("198.51.100.1:1", "after", `{"qty":1}`); w.Code != http.StatusAccepted {
		t.Fatalf("after the slow ones finished: %d; want 202", w.Code)
	}
}

func TestInFlightCapOff(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(c *Config) { c.MaxInFlight = -1 })
	e.reserver.set(func(_ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
		<-release
		return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
	})
	var wg sync.WaitGroup
	for i := range DefaultMaxInFlight + 10 {
		wg.Go(func() { e.from("198.51.100.1:1", "b"+strconv.Itoa(i), `{"qty":1}`) })
	}
	servicetest.WaitFor(t, 30*time.Second, "every request to reach the reserver", func() bool {
		return e.reserver.count() >= DefaultMaxInFlight+10
	})
	close(release)
	wg.Wait()
}

func TestNewRejectsBadProtection(t *testing.T) {
	limit := seckill.RateLimit{Rate: 1, Period: time.Second}
	for name, mod := range map[string]func(*Config){
		"IPLimit without limiter":   func(c *Config) { c.RateLimitIP = limit },
		"UserLimit without limiter": func(c *Config) { c.RateLimitUser = limit },
		"invalid IPLimit":           func(c *Config) { c.RateLimiter, c.RateLimitIP = limiterFunc(nil), seckill.RateLimit{Rate: 1} },
		"invalid prefix":            func(c *Config) { c.TrustedProxies = []netip.Prefix{{}} },
	} {
		c := Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{}, Verifier: jwt.NewVerifier(testSecret)}
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: New succeeded; want an error", name)
		}
	}
}

// TestSoldOutGateThroughHandler: after the sale sells out the stock store
// sees no more reservation calls for it, through the whole handler, until
// the safety interval passes or Clear.
func TestSoldOutGateThroughHandler(t *testing.T) {
	var left atomic.Int64
	left.Store(3)
	stock := &fakeReserver{}
	stock.set(func(_ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
		if left.Add(-r.Qty) < 0 {
			left.Add(r.Qty)
			return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
		}
		return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
	})
	clk := &clock{}
	clk.Set(t0)
	gate := soldout.New(stock, soldout.Config{SafetyInterval: time.Second, Now: clk.Now})
	e := newEnv(t, func(c *Config) {
		c.Reserver = gate
		c.RateLimiter, c.RateLimitIP, c.RateLimitUser = embeddedLimiter(t), seckill.RateLimit{Rate: 1000, Period: time.Minute}, DefaultRateLimitUser
	})
	statuses := map[int]int{}
	for i := range 4 {
		statuses[e.from("198.51.100.1:1", "b"+strconv.Itoa(i), `{"qty":1}`).Code]++
	}
	if statuses[202] != 3 || statuses[409] != 1 || stock.count() != 4 {
		t.Fatalf("selling out: %v after %d stock calls; want 3 × 202, 1 × 409, 4 calls", statuses, stock.count())
	}
	for i := range 200 {
		wantError(t, e.from("198.51.100.1:1", "late-"+strconv.Itoa(i%50), `{"qty":1}`), http.StatusConflict, seckill.ESOLDOUT)
	}
	if n := stock.count(); n != 4 {
		t.Fatalf("stock calls after sell-out: %d; want none", n-4)
	}
	clk.Advance(time.Second)
	e.from("198.51.100.1:1", "late-0", `{"qty":1}`)
	if n := stock.count(); n != 5 {
		t.Fatalf("stock calls after the safety interval: %d; want 1", n-4)
	}
	left.Store(1)
	gate.Clear(testSaleID)
	if w := e.from("198.51.100.1:1", "late-1", `{"qty":1}`); w.Code != http.StatusAccepted || stock.count() != 6 {
		t.Fatalf("after Clear: %d, %d stock calls; want 202 from the store", w.Code, stock.count())
	}
	assertMetric(t, e, `seckill_reservations_total{outcome="sold_out"} 202`)
}

// TestAdminRoutesThroughGuard: with every protection on, admin routes
// still need the admin token and refuse a buyer's, buyer routes refuse
// the admin token, and the profiler is admin-only.
func TestAdminRoutesThroughGuard(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.RateLimiter, c.RateLimitIP, c.RateLimitUser, c.MaxInFlight = embeddedLimiter(t), DefaultRateLimitIP, DefaultRateLimitUser, 8
	})
	e.sales.Put(testSale())
	buyer := "Bearer " + buyerToken(t, "alice")
	adminRoutes := []req{
		{method: "POST", path: "/admin/v1/sales", body: `{"name":"x","price_cents":1,"stock":1,"per_user_limit":1,"start_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"}`},
		{method: "GET", path: "/admin/v1/sales/" + testSaleID},
		{method: "POST", path: "/admin/v1/sales/" + testSaleID + "/preheat"},
		{method: "GET", path: "/admin/debug/pprof/"},
		{method: "GET", path: "/admin/debug/pprof/heap"},
		{method: "GET", path: "/admin/debug/pprof/goroutine?debug=2"},
		{method: "GET", path: "/admin/debug/pprof/profile?seconds=1"},
		{method: "POST", path: "/admin/debug/pprof/symbol"},
	}
	for _, rt := range adminRoutes {
		for _, auth := range []string{"", buyer, "Bearer " + testAdminToken + "x", "Basic " + testAdminToken} {
			rt.auth = auth
			wantError(t, e.do(rt), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
		}
	}
	w := e.do(req{method: "POST", path: "/api/v1/sales/" + testSaleID + "/reservations", body: `{"qty":1}`, auth: admin()})
	wantError(t, w, http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	if e.reserver.count() != 0 {
		t.Fatal("the admin token reserved")
	}

	for _, path := range []string{"/admin/debug/pprof/", "/admin/debug/pprof/heap?debug=1", "/admin/debug/pprof/goroutine?debug=1", "/admin/debug/pprof/allocs"} {
		if w := e.do(req{method: "GET", path: path, auth: admin()}); w.Code != http.StatusOK || w.Body.Len() == 0 {
			t.Errorf("GET %s as admin: %d, %d bytes; want 200 with a body", path, w.Code, w.Body.Len())
		}
	}
	// Flags may carry secrets: no cmdline.
	wantError(t, e.do(req{method: "GET", path: "/admin/debug/pprof/cmdline", auth: admin()}), http.StatusNotFound, seckill.ENOTFOUND)
	// The old, unauthenticated location serves nothing.
	wantError(t, e.do(req{method: "GET", path: "/debug/pprof/", auth: admin()}), http.StatusNotFound, seckill.ENOTFOUND)
	w = e.do(req{method: "DELETE", path: "/admin/debug/pprof/heap", auth: admin()})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
}
