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

// A lost reply is not retried: that would count the batch twice.
var rateCheckScript = rueidis.NewLuaScript(lua("ratecheck.lua"))

// CheckBatch counts a batch of saleID's requests against their rate
// checks in one script call, in the sale's slot and the same state as its
// claims' checks (reserve.lua): checks[i] are request i's, the same limits
// in the same order for every request. results[i] is -1 when request i
// was allowed, else the index of the check that refused it, and retry[i]
// how long until that check would allow it.
func (l RateLimiter) CheckBatch(ctx context.Context, saleID string, checks [][]seckill.RateCheck) (refusedBy []int, retry []time.Duration, err error) {
	if len(checks) == 0 {
		return nil, nil, nil
	}
	first := checks[0]
	if len(first) == 0 || len(first) > seckill.MaxRateChecks || !seckill.ValidSaleID(saleID) {
		return nil, nil, seckill.Errorf(seckill.EINVALID, "rate check batch: invalid sale id or checks")
	}
	keys := make([]string, len(first))
	for k, c := range first {
		if err := c.Limit.Validate(); err != nil {
			return nil, nil, fmt.Errorf("rate check batch: %w", err)
		}
		keys[k] = l.saleRateBase(saleID, c.Limit)
	}
	args := make([]string, 0, 1+len(first)*len(checks))
	args = append(args, strconv.Itoa(len(first)))
	for i, cs := range checks {
		if !sameLimits(cs, first) {
			return nil, nil, seckill.Errorf(seckill.EINVALID, "rate check batch: request %d has other limits", i)
		}
		for _, c := range cs {
			if c.Key == "" || len(c.Key) > MaxRateKeyBytes {
				return nil, nil, seckill.Errorf(seckill.EINVALID, "rate check batch: request %d: a key must be 1 to %d bytes", i, MaxRateKeyBytes)
			}
			args = append(args, c.Key)
		}
	}
	vals, err := rateCheckScript.Exec(ctx, l.client, keys, args).ToArray()
	if err != nil {
		return nil, nil, fmt.Errorf("rate check batch: %w", classify(err))
	}
	if len(vals) != len(checks) {
		return nil, nil, fmt.Errorf("rate check batch: %d answers to %d requests", len(vals), len(checks))
	}
	refusedBy, retry = make([]int, len(checks)), make([]time.Duration, len(checks))
	for i, v := range vals {
		refusedBy[i] = -1
		if n, err := v.AsInt64(); err == nil && n == 0 {
			continue
		}
		pair, err := v.AsIntSlice()
		if err != nil || len(pair) != 2 || pair[0] < 0 || pair[0] >= int64(len(first)) || pair[1] < 0 {
			return nil, nil, fmt.Errorf("rate check batch: unexpected answer %v for request %d", v, i)
		}
		refusedBy[i], retry[i] = int(pair[0]), time.Duration(pair[1])*time.Microsecond
	}
	return refusedBy, retry, nil
}
