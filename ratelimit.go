package seckill

import (
	"context"
	"strconv"
	"time"
)

// RateLimit is at most Rate requests per Period, in bursts of up to Rate (the
// GCRA of go-redis/redis_rate). The zero RateLimit is no limit.
type RateLimit struct {
	Rate   int
	Period time.Duration
}

// Bounds on a Limit: what a limiter derives from one stays inside Lua's
// exact integers.
const (
	MaxLimitRate     = 1_000_000
	MinLimitPeriod   = time.Millisecond
	MaxLimitPeriod   = 24 * time.Hour
	minLimitInterval = time.Microsecond // Period/Rate at the least
)

// Interval is the time one request uses up of the limit: Period/Rate.
func (l RateLimit) Interval() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return l.Period / time.Duration(l.Rate)
}

// IsZero reports whether l is the zero Limit (no limit).
func (l RateLimit) IsZero() bool { return l == RateLimit{} }

// Validate checks that l is a limit a RateLimiter can enforce.
func (l RateLimit) Validate() error {
	switch {
	case l.Rate < 1 || l.Rate > MaxLimitRate:
		return Errorf(EINVALID, "rate limit: rate must be between 1 and %d", MaxLimitRate)
	case l.Period < MinLimitPeriod || l.Period > MaxLimitPeriod:
		return Errorf(EINVALID, "rate limit: period must be between %s and %s", MinLimitPeriod, MaxLimitPeriod)
	case l.Interval() < minLimitInterval:
		return Errorf(EINVALID, "rate limit: at most one request per %s (period/rate)", minLimitInterval)
	}
	return nil
}

// String formats l as the configuration writes it, e.g. "20/1m"; the zero
// Limit is "off".
func (l RateLimit) String() string {
	if l.IsZero() {
		return "off"
	}
	var per string
	switch p := l.Period; {
	case p > 0 && p%time.Hour == 0:
		per = strconv.FormatInt(int64(p/time.Hour), 10) + "h"
	case p > 0 && p%time.Minute == 0:
		per = strconv.FormatInt(int64(p/time.Minute), 10) + "m"
	case p > 0 && p%time.Second == 0:
		per = strconv.FormatInt(int64(p/time.Second), 10) + "s"
	default:
		per = p.String()
	}
	return strconv.Itoa(l.Rate) + "/" + per
}

// RateResult is a RateLimiter's decision on one request.
type RateResult struct {
	Allowed    bool
	RetryAfter time.Duration // until a request would be allowed; 0 when Allowed
	Remaining  int           // requests allowed right now
}

// RateLimiter counts requests per key against a limit, shared by every API
// node (internal/redis).
type RateLimiter interface {
	// Allow counts one request under key unless it is refused.
	Allow(ctx context.Context, key string, limit RateLimit) (RateResult, error)
}

// Admit is one step of l's GCRA (the algorithm of the Redis limiter, in
// memory) for a key whose theoretical arrival time is tat at now: ok when
// one more request fits, with the key's tat after it; else how long until
// one would fit, the tat unchanged. A key never seen has the zero tat, and
// a tat at or before now has its whole burst back, so a store may forget
// a key once its tat has passed. The zero RateLimit admits everything.
func (l RateLimit) Admit(tat, now time.Time) (next time.Time, retry time.Duration, ok bool) {
	t := l.Interval()
	if t <= 0 {
		return tat, 0, true
	}
	if tat.Before(now) {
		tat = now
	}
	next = tat.Add(t)
	// A burst of Rate: the tat may run up to a Period ahead of now.
	if allowAt := next.Add(-l.Period); allowAt.After(now) {
		return tat, allowAt.Sub(now), false
	}
	return next, 0, true
}
