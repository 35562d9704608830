package brokerpack

import (
	"fmt"
	"time"
)

// RetryPolicy: failed attempt n is retried after Delay(n), and dead-lettered
// once it has failed MaxAttempts times.
type RetryPolicy struct {
	MaxAttempts int
	// Backoff is the first wait; it doubles each time, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is 5 attempts with back-off 100ms, 200ms, 400ms, 800ms.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 5, Backoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

// Validate reports a policy that cannot work.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("retry policy: MaxAttempts must be at least 1, got %d", p.MaxAttempts)
	case p.Backoff < time.Millisecond:
		return fmt.Errorf("retry policy: Backoff must be at least 1ms, got %s", p.Backoff)
	case p.MaxBackoff < p.Backoff:
		return fmt.Errorf("retry policy: MaxBackoff %s is below Backoff %s", p.MaxBackoff, p.Backoff)
	}
	return nil
}

// Delay is the wait before attempt+1 after attempt (1-based) failed.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}
