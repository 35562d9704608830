package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// A lost reply is not retried: that would count the request twice. The
// caller decides what an unanswered limiter means (the API lets the
// request through).
var rateLimitScript = rueidis.NewLuaScript(lua("ratelimit.lua"))

// MaxRateKeyBytes bounds a rate-limit key ("ip:…", "user:<user id>").
const MaxRateKeyBytes = 256

// RateLimiter is the shared rate limiter (seckill.RateLimiter): one GCRA
// state per limited key, on the Redis clock.
type RateLimiter struct{ *conn }

var _ seckill.RateLimiter = RateLimiter{}

// RateLimiter returns the store's rate limiter.
func (s *Store) RateLimiter() RateLimiter { return RateLimiter{s.conn} }

// rateKeyEscaper keeps braces out of the hash tag, so the whole limited
// key is the tag (a '}' inside it would end the tag early) and distinct
// keys stay distinct.
var rateKeyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// rateKey is the Redis key counting requests under key against limit:
// <prefix>:rl:{<key>}:<interval µs>:<tolerance µs>. One key per script
// call, so any slot will do; the tag spreads the keys over a Cluster by
// limited key. The limit is part of the name because a GCRA state only
// means something under the limit that wrote it: while nodes disagree (a
// limit change rolling out), a node at 5/1m would otherwise push a shared
// key so far ahead that a node at a much higher limit refuses the address
// for minutes, and a raised limit would not take effect until the old
// state expired. Nodes that agree share one key, so the limit stays exact
// across them.
func (s *conn) rateKey(key string, interval, tolerance int64) string {
	return s.prefix + ":rl:{" + rateKeyEscaper.Replace(key) + "}:" + strconv.FormatInt(interval, 10) + ":" + strconv.FormatInt(tolerance, 10)
}

// Allow counts one request under key against limit with GCRA on the
// Redis clock (see ratelimit.lua): a fresh key allows limit.Rate requests
// at once, then one every limit.Period/limit.Rate (rounded down to a
// microsecond). Refused requests are not counted. The state of a key
// expires as soon as it is back to a full burst.
func (s RateLimiter) Allow(ctx context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error) {
	if err := limit.Validate(); err != nil {
		return seckill.RateResult{}, fmt.Errorf("allow: %w", err)
	}
	if key == "" || len(key) > MaxRateKeyBytes {
		return seckill.RateResult{}, fmt.Errorf("allow: %w",
			seckill.Errorf(seckill.EINVALID, "rate limit key must be 1 to %d bytes", MaxRateKeyBytes))
	}
	interval := limit.Interval().Microseconds()
	tolerance := interval * int64(limit.Rate)
	args := []string{strconv.FormatInt(interval, 10), strconv.FormatInt(tolerance, 10)}
	vals, err := rateLimitScript.Exec(ctx, s.client, []string{s.rateKey(key, interval, tolerance)}, args).AsIntSlice()
	if err != nil {
		return seckill.RateResult{}, fmt.Errorf("allow: %w", classify(err))
	}
	if len(vals) != 3 || vals[0] < 0 || vals[0] > 1 || vals[1] < 0 || vals[2] < 0 {
		return seckill.RateResult{}, fmt.Errorf("allow: unexpected answer %v from rate limit script", vals)
	}
	return seckill.RateResult{
		Allowed:    vals[0] == 1,
		Remaining:  int(min(vals[1], int64(limit.Rate))),
		RetryAfter: time.Duration(vals[2]) * time.Microsecond,
	}, nil
}

// rateShape checks request i's rate checks against the batch's first
// request's, first: the same limits in the same order, each key 1 to
// MaxRateKeyBytes bytes, at most seckill.MaxRateChecks. The scripts that
// take them (reserve.lua, lottery_enter.lua, queue_join.lua) count every
// request's check k under one limit.
func rateShape(i int, checks, first []seckill.RateCheck) error {
	if len(checks) > seckill.MaxRateChecks {
		return seckill.Errorf(seckill.EINVALID, "request %d: %d rate checks, at most %d", i, len(checks), seckill.MaxRateChecks)
	}
	if !sameLimits(checks, first) {
		return seckill.Errorf(seckill.EINVALID, "request %d has other rate limits than the batch's first", i)
	}
	for _, c := range checks {
		if c.Key == "" || len(c.Key) > MaxRateKeyBytes {
			return seckill.Errorf(seckill.EINVALID, "request %d: a rate limit key must be 1 to %d bytes", i, MaxRateKeyBytes)
		}
		if i == 0 {
			if err := c.Limit.Validate(); err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	return nil
}

// rateRefusal reads a script's {k, retry_after_us} answer to a request
// with checks rate checks.
func rateRefusal(m rueidis.RedisMessage, checks int) (by int, retry time.Duration, err error) {
	pair, err := m.AsIntSlice()
	if err != nil || len(pair) != 2 || pair[0] < 0 || pair[0] >= int64(checks) || pair[1] < 0 {
		return 0, 0, fmt.Errorf("unexpected rate refusal %v", m)
	}
	return int(pair[0]), time.Duration(pair[1]) * time.Microsecond, nil
}
