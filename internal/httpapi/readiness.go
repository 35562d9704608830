package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// readyFor is how long one readiness check answers /readyz.
const readyFor = time.Second

// readiness answers /readyz from one check of the backends at a time,
// kept for readyFor. A check pings the database, Redis and the broker, and
// the route is public (a load balancer's probe, and anyone who finds it),
// so each request checking for itself would let a client make every
// backend answer as fast as it asks, and log a warning a request while one
// is down. Now the probes of a second share one check and one warning.
type readiness struct {
	check  func(ctx context.Context) error
	now    func() time.Time
	logger *slog.Logger

	mu     sync.Mutex
	err    error
	at     time.Time // when the kept check began; zero: none yet
	checks singleflight.Group
}

// state is the readiness at now: nil when ready.
func (c *readiness) state(ctx context.Context) error {
	now := c.now()
	c.mu.Lock()
	err, at := c.err, c.at
	c.mu.Unlock()
	if !at.IsZero() && now.Sub(at) < readyFor && !now.Before(at) {
		return err
	}
	v, _, _ := c.checks.Do("", func() (any, error) {
		// The probes waiting on it share the check: it outlives the one
		// that began it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := c.check(ctx)
		if err != nil {
			// Not a client error: operators need the cause, and probes
			// repeat, so warn rather than error.
			c.logger.WarnContext(ctx, "not ready", "err", err)
		}
		c.mu.Lock()
		c.err, c.at = err, now
		c.mu.Unlock()
		return err, nil
	})
	err, _ = v.(error)
	return err
}
