package eventdelivery

import (
	"context"
	"time"

	"github.com/seckill-dev/seckill"
)

// Outbox is the database side of order-event delivery (internal/sqlstore).
type Outbox interface {
	// Claim leases to owner until now+lease up to limit due events, each the
	// first undelivered one of its order.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*seckill.EventDelivery, error)
	Delivered(ctx context.Context, seqs []int64, now time.Time) error
	// Failed records a failed attempt; false when owner lost the lease.
	Failed(ctx context.Context, seq int64, owner, lastErr string, next time.Time, dead bool, now time.Time) (bool, error)
}

// Policy says when a failed delivery is tried again and when it
// is given up.
type Policy struct {
	// FirstBackoff doubles after each failure, up to MaxBackoff.
	FirstBackoff time.Duration
	MaxBackoff   time.Duration
	RetryFor     time.Duration // from the event; the next failure dead-letters it
}

// DefaultPolicy retries for a day, from one second apart up to ten
// minutes apart.
var DefaultPolicy = Policy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Minute, RetryFor: 24 * time.Hour}

// Backoff is the pause after the attempts-th failure, less up to a fifth by
// jitter in [0, 1), so events that failed together spread out.
func (p Policy) Backoff(attempts int, jitter float64) time.Duration {
	d := p.FirstBackoff
	for i := 1; i < attempts && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d - time.Duration(float64(d)*0.2*min(max(jitter, 0), 1))
}

// AfterFailure is the next attempt after the attempts-th failure, or dead
// when it would come more than RetryFor after from.
func (p Policy) AfterFailure(attempts int, from, now time.Time, jitter float64) (next time.Time, dead bool) {
	next = now.Add(p.Backoff(attempts, jitter))
	if next.Sub(from) > p.RetryFor {
		return time.Time{}, true
	}
	return next, false
}
