package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// RateLimiter exercises a seckill.RateLimiter. newLimiter is called once
// per subtest; keys are unique per subtest, so limiters may share state.
// Subtests run in parallel. The limiter's clock is its own (Redis TIME):
// the tests that need time to pass sleep for real, a few hundred
// milliseconds at most.
func RateLimiter(t *testing.T, newLimiter func(t *testing.T) seckill.RateLimiter) {
	t.Helper()

	t.Run("BurstThenRefuse", func(t *testing.T) {
		t.Parallel()
		l, key := newLimiter(t), servicetest.UniqueName("rl")
		limit := seckill.RateLimit{Rate: 5, Period: time.Hour}
		for i := range 5 {
			r := allow(t, l, key, limit)
			if !r.Allowed || r.Remaining != 4-i || r.RetryAfter != 0 {
				t.Fatalf("request %d = %+v; want allowed, %d remaining, no retry", i+1, r, 4-i)
			}
		}
		interval := limit.Interval() // 12 minutes
		for i := range 3 {
			r := allow(t, l, key, limit)
			if r.Allowed || r.Remaining != 0 || r.RetryAfter <= interval-time.Minute || r.RetryAfter > interval {
				t.Fatalf("request %d over the burst = %+v; want refused, 0 remaining, retry in (%s, %s]",
					6+i, r, interval-time.Minute, interval)
			}
		}
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		l, base := newLimiter(t), servicetest.UniqueName("rl")
		limit := seckill.RateLimit{Rate: 2, Period: time.Hour}
		// Keys that an escaping or hash-tagging mistake could merge.
		keys := []string{
			base + ":a", base + ":b", base + ":{a}", base + ":%7Ba%7D", base + ":a}", base + ":{",
			base + ":ключ", base + ":::1", base + ":a b", base + ":A",
		}
		for _, k := range keys {
			for i := range 2 {
				if r := allow(t, l, k, limit); !r.Allowed {
					t.Fatalf("key %q request %d = %+v; want allowed (another key's count leaked in)", k, i+1, r)
				}
			}
		}
		for _, k := range keys {
			if r := allow(t, l, k, limit); r.Allowed {
				t.Fatalf("key %q request 3 = %+v; want refused", k, r)
			}
		}
	})

	t.Run("RefusedRequestsAreNotCounted", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t)
		limit := seckill.RateLimit{Rate: 2, Period: 600 * time.Millisecond} // one per 300ms after the burst
		for try := 1; !refusalsNotCounted(t, l, limit); try++ {
			if try == 5 {
				t.Fatal("5 tries on fresh keys, each with a call stalled across a time bound: nothing shown")
			}
		}
	})

	t.Run("RefillsAtTheRate", func(t *testing.T) {
		t.Parallel()
		l, key := newLimiter(t), servicetest.UniqueName("rl")
		limit := seckill.RateLimit{Rate: 4, Period: 400 * time.Millisecond}
		for range 4 {
			allow(t, l, key, limit)
		}
		// A full period later the whole burst is back.
		time.Sleep(limit.Period + 20*time.Millisecond)
		burst := time.Now()
		for i := range 4 {
			if r := allow(t, l, key, limit); !r.Allowed {
				t.Fatalf("request %d a period later = %+v; want allowed", i+1, r)
			}
		}
		r := allow(t, l, key, limit)
		// One unit refills every Period/Rate (100ms); a loaded machine may
		// take that long over these five calls, and then a fifth is fair.
		if took := time.Since(burst); took < limit.Period/time.Duration(limit.Rate) && r.Allowed {
			t.Fatalf("request 5, %s after the burst began = %+v; want refused", took, r)
		}
	})

	t.Run("ConcurrentCallersShareOneCount", func(t *testing.T) {
		t.Parallel()
		l, key := newLimiter(t), servicetest.UniqueName("rl")
		limit := seckill.RateLimit{Rate: 25, Period: time.Hour}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				for range 5 {
					r, err := l.Allow(context.Background(), key, limit)
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if n := allowed.Load(); n != 25 {
			t.Fatalf("200 concurrent requests: %d allowed; want exactly 25", n)
		}
	})

	t.Run("InvalidInput", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t)
		ctx := context.Background()
		good := seckill.RateLimit{Rate: 1, Period: time.Second}
		if _, err := l.Allow(ctx, "", good); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("empty key: err = %v; want code %s", err, seckill.EINVALID)
		}
		for _, limit := range []seckill.RateLimit{{}, {Rate: 0, Period: time.Second}, {Rate: 1}, {Rate: 2, Period: time.Microsecond}} {
			if _, err := l.Allow(ctx, servicetest.UniqueName("rl"), limit); seckill.ErrorCode(err) != seckill.EINVALID {
				t.Errorf("limit %+v: err = %v; want code %s", limit, err, seckill.EINVALID)
			}
		}
	})
}

// refusalsNotCounted is one try of RefusedRequestsAreNotCounted, on a
// fresh key. The limiter's clock is not the test's: a call was decided
// somewhere between when it was sent and when it returned, so each check
// fails only on an answer that no such instant allows. A call that a
// loaded machine stalled across a bound proves nothing either way, and
// the try reports false, to be run again.
func refusalsNotCounted(t *testing.T, l seckill.RateLimiter, limit seckill.RateLimit) bool {
	t.Helper()
	key := servicetest.UniqueName("rl")
	allow(t, l, key, limit)
	allow(t, l, key, limit)
	sent := time.Now()
	first := allow(t, l, key, limit)
	if first.Allowed || first.RetryAfter <= 0 || first.RetryAfter > limit.Interval() {
		t.Fatalf("request over the burst = %+v; want refused with retry in (0, %s]", first, limit.Interval())
	}
	// The slot comes back between these two instants.
	earliest, latest := sent.Add(first.RetryAfter), time.Now().Add(first.RetryAfter)
	// Hammering while refused must not push the slot back.
	for time.Until(earliest) > 100*time.Millisecond {
		if r := allow(t, l, key, limit); r.Allowed {
			if left := time.Until(earliest); left > 0 {
				t.Fatalf("allowed %s before the retry time", left)
			}
			return false // stalled past the retry time, and took the slot fairly
		}
		time.Sleep(5 * time.Millisecond) // pacing, not waiting: the loop ends on the clock
	}
	time.Sleep(time.Until(latest))
	if r := allow(t, l, key, limit); !r.Allowed {
		t.Fatalf("request after RetryAfter = %+v; want allowed (refusals were counted)", r)
	}
	if r := allow(t, l, key, limit); r.Allowed {
		if time.Now().Before(earliest.Add(limit.Interval())) {
			t.Fatalf("second request after RetryAfter = %+v; want refused (only one slot came back)", r)
		}
		return false // stalled until the next slot
	}
	return true
}

func allow(t *testing.T, l seckill.RateLimiter, key string, limit seckill.RateLimit) seckill.RateResult {
	t.Helper()
	r, err := l.Allow(context.Background(), key, limit)
	if err != nil {
		t.Fatalf("Allow(%q, %v): %v", key, limit, err)
	}
	return r
}
