package combiner

import (
	"context"
	"strconv"
	"time"

	"github.com/seckill-dev/seckill"
)

// RateStore counts a batch of one sale's requests against their rate
// checks in one call (internal/redis.RateLimiter).
type RateStore interface {
	CheckBatch(ctx context.Context, saleID string, checks [][]seckill.RateCheck) (refusedBy []int, retry []time.Duration, err error)
}

// RateChecker batches the rate checks of a sale's lottery entries and
// queue joins, as the claims' checks ride in their reserve batches: one
// script call per batch instead of one limiter call per check.
type RateChecker struct {
	b *Batcher[rateCall, rateAnswer]
}

type rateCall struct {
	saleID string
	checks []seckill.RateCheck
}

type rateAnswer struct {
	by    int
	retry time.Duration
}

// NewRateChecker returns a RateChecker in front of store.
func NewRateChecker(store RateStore, cfg Config) *RateChecker {
	return &RateChecker{b: NewBatcher(func(ctx context.Context, _ string, batch []rateCall) ([]rateAnswer, error) {
		checks := make([][]seckill.RateCheck, len(batch))
		for i, c := range batch {
			checks[i] = c.checks
		}
		by, retry, err := store.CheckBatch(ctx, batch[0].saleID, checks)
		if err != nil {
			return nil, err
		}
		out := make([]rateAnswer, len(batch))
		for i := range out {
			out[i] = rateAnswer{by: by[i], retry: retry[i]}
		}
		return out, nil
	}, cfg)}
}

// CheckRates counts one request of saleID against checks, batched with
// the sale's others: refusedBy is -1 when allowed, else the refusing
// check, and retry how long it refuses.
func (r *RateChecker) CheckRates(ctx context.Context, saleID string, checks []seckill.RateCheck) (refusedBy int, retry time.Duration, err error) {
	// Requests with as many checks share a batch: the node's limits are
	// the same for all, so only a check left out (no client address)
	// changes the shape.
	a, err := r.b.Do(ctx, saleID+"/"+strconv.Itoa(len(checks)), rateCall{saleID: saleID, checks: checks})
	return a.by, a.retry, err
}

// Stop drains the batches in flight.
func (r *RateChecker) Stop(ctx context.Context) error { return r.b.Stop(ctx) }
