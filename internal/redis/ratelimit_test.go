package redis

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestRateLimiter runs the rate limiter's conformance suite, and what only
// Redis can show, on miniredis, Redis and a Redis Cluster.
func TestRateLimiter(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		t.Run("Conformance", func(t *testing.T) {
			conformance.RateLimiter(t, func(t *testing.T) seckill.RateLimiter { return newStore(t).RateLimiter() })
		})
		runParallel(t, newStore, []storeTest{
			{"KeyExpiresWithItsBurst", testRateKeyExpires},
			{"NodesThatDisagree", testRateLimitNodesDisagree},
			{"KeyTooLong", func(t *testing.T, s *Store) {
				limit := seckill.RateLimit{Rate: 1, Period: time.Second}
				if _, err := s.RateLimiter().Allow(context.Background(), strings.Repeat("k", MaxRateKeyBytes), limit); err != nil {
					t.Errorf("key of %d bytes: %v", MaxRateKeyBytes, err)
				}
				if _, err := s.RateLimiter().Allow(context.Background(), strings.Repeat("k", MaxRateKeyBytes+1), limit); seckill.ErrorCode(err) != seckill.EINVALID {
					t.Errorf("key of %d bytes: err = %v; want code %s", MaxRateKeyBytes+1, err, seckill.EINVALID)
				}
			}},
		})
	})
}

// testRateKeyExpires checks the state of a key lives no longer than it
// matters: until its burst is whole again.
func testRateKeyExpires(t *testing.T, s *Store) {
	ctx := context.Background()
	key := servicetest.UniqueName("ip:")
	limit := seckill.RateLimit{Rate: 20, Period: time.Minute} // 3 s per request
	for range 3 {
		if r, err := s.RateLimiter().Allow(ctx, key, limit); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	ttl, err := s.client.Do(ctx, s.client.B().Pttl().Key(s.rateKey(key, 3_000_000, 60_000_000)).Build()).AsInt64()
	if err != nil || ttl <= 8000 || ttl > 9000 {
		t.Fatalf("PTTL after 3 requests at 3 s each = %d, %v; want (8000, 9000] ms", ttl, err)
	}
}

// testRateLimitNodesDisagree: a limit change rolls out node by node, so for
// a while nodes count one address under different limits. A node still at
// a low limit must not lock the address out of a node already at a high
// one, a raised limit takes effect at once, and nodes that agree share
// one exact count (the seed's 20 a minute: exactly 20 of 100 pass,
// whichever node each request reaches; the script runs on Redis, so two
// nodes are two callers of it).
func testRateLimitNodesDisagree(t *testing.T, s *Store) {
	ctx := context.Background()
	key := servicetest.UniqueName("ip:")
	old, raised := seckill.RateLimit{Rate: 20, Period: time.Minute}, seckill.RateLimit{Rate: 40, Period: time.Minute}
	passed, start := 0, time.Now()
	for i := range 100 {
		r, err := s.RateLimiter().Allow(ctx, key, old) // node A and node B alike
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r.Allowed {
			passed++
		}
	}
	if want, refills := 20, refillsSince(start, old); passed < want || passed > want+refills {
		t.Fatalf("%d of 100 requests at 20/1m passed; want exactly 20 (plus the %d refilled while they were sent)", passed, refills)
	}
	// Node A is still at 5/1m and hammers the key far ahead.
	low := seckill.RateLimit{Rate: 5, Period: time.Minute}
	for range 50 {
		if _, err := s.RateLimiter().Allow(ctx, key, low); err != nil {
			t.Fatal(err)
		}
	}
	// Node B, already at 1,000,000/1s, is not locked out by A's state.
	if r, err := s.RateLimiter().Allow(ctx, key, seckill.RateLimit{Rate: 1_000_000, Period: time.Second}); err != nil || !r.Allowed {
		t.Fatalf("node at 1000000/1s after a node at 5/1m: Allow = %+v, %v; want allowed", r, err)
	}
	// The limit raised from 20/1m to 40/1m: 40 more pass at once, not
	// after the old state's minute.
	passed, start = 0, time.Now()
	for range 60 {
		if r, err := s.RateLimiter().Allow(ctx, key, raised); err != nil {
			t.Fatal(err)
		} else if r.Allowed {
			passed++
		}
	}
	if want, refills := 40, refillsSince(start, raised); passed < want || passed > want+refills {
		t.Fatalf("after raising the limit to 40/1m, %d of 60 passed at once; want 40 (plus the %d refilled while they were sent)", passed, refills)
	}
}

// refillsSince is how many units limit has refilled since start: on a
// loaded machine a run of requests may take longer than one refill
// interval, and then a unit more is fairly allowed.
func refillsSince(start time.Time, limit seckill.RateLimit) int {
	return int(time.Since(start) / limit.Interval())
}

// TestRateLimitGCRAExact pins the algorithm on miniredis's settable
// clock: the burst, the spacing after it, the retry times to the
// microsecond, and numbers as big as today's Unix microseconds.
func TestRateLimitGCRAExact(t *testing.T) {
	ctx := context.Background()
	s, err := StartEmbedded(ctx)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	defer s.Close()
	now := time.Date(2030, 1, 1, 12, 0, 0, 123456000, time.UTC)
	at := func(d time.Duration) { s.embedded.SetTime(now.Add(d)) }
	limit := seckill.RateLimit{Rate: 20, Period: time.Minute}
	key := "ip:192.0.2.1"
	want := func(step string, allowed bool, remaining int, retry time.Duration) {
		t.Helper()
		r, err := s.RateLimiter().Allow(ctx, key, limit)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining || r.RetryAfter != retry {
			t.Fatalf("%s: Allow = %+v, %v; want allowed %v, remaining %d, retry %s", step, r, err, allowed, remaining, retry)
		}
	}

	at(0)
	for i := range 20 {
		want("burst "+strconv.Itoa(i+1), true, 19-i, 0)
	}
	want("21st at once", false, 0, 3*time.Second)
	at(time.Second + 250*time.Millisecond)
	want("21st 1.25 s later", false, 0, 1750*time.Millisecond)
	at(3 * time.Second)
	want("21st 3 s later", true, 0, 0)
	want("22nd 3 s later", false, 0, 3*time.Second)
	at(3*time.Second + 2*time.Microsecond)
	want("22nd 2 µs later", false, 0, 3*time.Second-2*time.Microsecond)
	// The TAT is stored as exact microseconds: 21 requests of 3 s after now.
	tat, err := s.client.Do(ctx, s.client.B().Get().Key(s.rateKey(key, 3_000_000, 60_000_000)).Build()).ToString()
	if wantTAT := strconv.FormatInt(now.Add(63*time.Second).UnixMicro(), 10); err != nil || tat != wantTAT {
		t.Fatalf("stored TAT = %q, %v; want %s", tat, err, wantTAT)
	}
	at(63 * time.Second)
	for i := range 20 {
		want("burst again "+strconv.Itoa(i+1), true, 19-i, 0)
	}
	want("over the second burst", false, 0, 3*time.Second)

	// A rate that does not divide the period: the interval is rounded
	// down to a microsecond, and the burst is still exactly the rate.
	odd := seckill.RateLimit{Rate: 7, Period: time.Minute} // 8571428.57 µs
	for i := range 7 {
		if r, err := s.RateLimiter().Allow(ctx, "odd", odd); err != nil || !r.Allowed || r.Remaining != 6-i {
			t.Fatalf("odd burst %d = %+v, %v", i+1, r, err)
		}
	}
	if r, err := s.RateLimiter().Allow(ctx, "odd", odd); err != nil || r.Allowed || r.RetryAfter != 8571428*time.Microsecond {
		t.Fatalf("odd 8th = %+v, %v; want refused, retry 8.571428 s", r, err)
	}
}

// TestRateLimitUnavailable: a limiter that cannot reach Redis says so with
// the code the API fails open on.
func TestRateLimitUnavailable(t *testing.T) {
	s, err := StartEmbedded(context.Background())
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	s.Close()
	_, err = s.RateLimiter().Allow(context.Background(), "ip:192.0.2.1", seckill.RateLimit{Rate: 1, Period: time.Second})
	if seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("Allow on a closed store: err = %v; want code %s", err, seckill.EUNAVAILABLE)
	}
}

func TestRateKeyEscaping(t *testing.T) {
	s := &conn{prefix: "sk"}
	for key, want := range map[string]string{
		"ip:192.0.2.1":      "sk:rl:{ip:192.0.2.1}:3000000:60000000",
		"user:a{b}c":        "sk:rl:{user:a%7Bb%7Dc}:3000000:60000000",
		"user:a%7Bb%7Dc":    "sk:rl:{user:a%257Bb%257Dc}:3000000:60000000",
		"ip6:2001:db8::/64": "sk:rl:{ip6:2001:db8::/64}:3000000:60000000",
	} {
		if got := s.rateKey(key, 3_000_000, 60_000_000); got != want {
			t.Errorf("rateKey(%q) = %q; want %q", key, got, want)
		}
	}
}

// BenchmarkAllow measures an allowed request on the real Redis: one
// EVALSHA per call, keys spread like the IPs of a crowd.
func BenchmarkAllow(b *testing.B) {
	s := connect(b, servicetest.Redis.URL(b))
	limit := seckill.RateLimit{Rate: seckill.MaxLimitRate, Period: time.Second}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "ip:10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
	}
	var next atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			r, err := s.RateLimiter().Allow(ctx, keys[next.Add(1)%int64(len(keys))], limit)
			if err != nil || !r.Allowed {
				b.Errorf("Allow = %+v, %v; want allowed", r, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkAllowRefused is what a blocked client costs when every one of
// its requests asks Redis; the API's local block list answers them
// without Redis (httpapi's BenchmarkBlockedClient).
func BenchmarkAllowRefused(b *testing.B) {
	s := connect(b, servicetest.Redis.URL(b))
	limit := seckill.RateLimit{Rate: 1, Period: time.Hour}
	ctx := context.Background()
	if _, err := s.RateLimiter().Allow(ctx, "ip:192.0.2.1", limit); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := s.RateLimiter().Allow(ctx, "ip:192.0.2.1", limit)
			if err != nil || r.Allowed {
				b.Errorf("Allow = %+v, %v; want refused", r, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// testAdmissionRateChecks: lottery entries and queue joins count their
// rate checks in their own script call, as claims do and in the same
// state: 20 a minute from one address lets 20 entries and joins through
// in batches of any size, and refuses the rest by the address's check
// with a retry, recording no entry and giving no place; a claim from the
// address is then refused too (one budget), and a buyer who entered is
// refused before their entry is looked up (the checks come first).
func testAdmissionRateChecks(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit))
	lot, queue := *sale, *sale // the same sale's slot and rate state, as other modes
	lot.Admission = seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: time.Now().Add(time.Hour)}
	queue.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1}
	perMin := seckill.RateLimit{Rate: 20, Period: time.Minute}
	loose := seckill.RateLimit{Rate: 1_000_000, Period: time.Second}
	ip := "ip:" + servicetest.UniqueName("203.0.113.")
	checks := func(user string) []seckill.RateCheck {
		return []seckill.RateCheck{{Key: ip, Limit: perMin}, {Key: "user:" + user, Limit: loose}}
	}
	refusal := func(by int, retry time.Duration) {
		t.Helper()
		if by != 0 || retry <= 0 || retry > 3*time.Second+time.Second {
			t.Errorf("refusal by %d, retry %v; want by check 0 (the address), retry in (0, 4s]", by, retry)
		}
	}
	allowed, refused := 0, 0
	var entered, refusedUsers []string
	for sent, b := 0, 0; sent < 25; b++ {
		n := min(1+sent%4, 25-sent)
		users := make([]string, n)
		for i := range users {
			users[i] = "u" + strconv.Itoa(sent+i)
		}
		if b%2 == 0 {
			reqs := make([]seckill.EntryRequest, n)
			for i, u := range users {
				reqs[i] = seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: u, Qty: 1, RateChecks: checks(u)}
			}
			res, err := s.Lottery().EnterBatch(ctx, &lot, reqs)
			if err != nil {
				t.Fatalf("EnterBatch: %v", err)
			}
			for i, r := range res {
				switch {
				case r.Refused == "" && r.New && r.Entry.ID == reqs[i].EntryID:
					allowed++
					entered = append(entered, users[i])
				case r.Refused == seckill.ERATELIMITED:
					refused++
					refusal(r.RateLimitedBy, r.RetryAfter)
					refusedUsers = append(refusedUsers, users[i])
				default:
					t.Fatalf("entry %d = %+v; want new or rate limited", i, r)
				}
			}
		} else {
			reqs := make([]seckill.QueueJoin, n)
			for i, u := range users {
				reqs[i] = seckill.QueueJoin{UserID: u, IP: ip, RateChecks: checks(u)}
			}
			res, err := s.Queue().JoinBatch(ctx, &queue, 0, reqs)
			if err != nil {
				t.Fatalf("JoinBatch: %v", err)
			}
			for i, r := range res {
				switch {
				case !r.RateLimited && r.Refused == "" && r.Position > 0:
					allowed++
				case r.RateLimited && r.Position == 0 && r.Refused == "":
					refused++
					refusal(r.RateLimitedBy, r.RetryAfter)
					refusedUsers = append(refusedUsers, users[i])
				default:
					t.Fatalf("join %d = %+v; want a place or rate limited", i, r)
				}
			}
		}
		sent += n
	}
	if allowed != 20 || refused != 5 {
		t.Fatalf("allowed %d, refused %d; want 20 and 5", allowed, refused)
	}
	for _, u := range refusedUsers {
		if _, ok, err := s.Lottery().Entry(ctx, sale.ID, u); err != nil || ok {
			t.Errorf("Entry(%s) after a refusal = %v, %v; want none", u, ok, err)
		}
		if _, ok, err := s.Queue().Position(ctx, sale.ID, u); err != nil || ok {
			t.Errorf("Position(%s) after a refusal = %v, %v; want none", u, ok, err)
		}
	}
	req := request(sale.ID, "claimer", 1, "")
	req.RateChecks = checks("claimer")
	res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{req})
	if err != nil || res[0].Outcome != seckill.OutcomeRateLimited {
		t.Fatalf("a claim from the same address after 20 entries and joins = %+v, %v; want rate limited (one budget)", res, err)
	}
	again, err := s.Lottery().EnterBatch(ctx, &lot, []seckill.EntryRequest{{EntryID: seckill.NewEntryID(), UserID: entered[0], Qty: 1, RateChecks: checks(entered[0])}})
	if err != nil || again[0].Refused != seckill.ERATELIMITED {
		t.Fatalf("an entered buyer's entry from the limited address = %+v, %v; want rate limited", again, err)
	}
	// Without checks the same buyer gets their entry back.
	again, err = s.Lottery().EnterBatch(ctx, &lot, []seckill.EntryRequest{{EntryID: seckill.NewEntryID(), UserID: entered[0], Qty: 1}})
	if err != nil || again[0].Refused != "" || again[0].New || again[0].Entry.ID == "" {
		t.Fatalf("an entered buyer's entry without checks = %+v, %v; want their entry", again, err)
	}
	mixedE := []seckill.EntryRequest{{EntryID: seckill.NewEntryID(), UserID: "a", Qty: 1, RateChecks: checks("a")}, {EntryID: seckill.NewEntryID(), UserID: "b", Qty: 1, RateChecks: checks("b")[:1]}}
	if _, err := s.Lottery().EnterBatch(ctx, &lot, mixedE); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("entries of mixed limits: %v; want invalid", err)
	}
	mixedJ := []seckill.QueueJoin{{UserID: "a", RateChecks: checks("a")}, {UserID: "b", RateChecks: checks("b")[:1]}}
	if _, err := s.Queue().JoinBatch(ctx, &queue, 0, mixedJ); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("joins of mixed limits: %v; want invalid", err)
	}
}
