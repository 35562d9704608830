// Package breaker owns the circuit breakers that keep a node from hammering
// a backend that is down. One Breaker guards one backend (Redis, the
// database). While the backend answers, calls go through and the breaker
// only counts. After Threshold outages in a row (errors whose code is
// seckill.EUNAVAILABLE: refused, reset, timed out) it opens: calls fail at
// once with an EUNAVAILABLE error, costing the backend nothing. After
// OpenFor it lets one call through as a probe (half-open); the probe's
// success closes it, its failure opens it again. So a node that comes back
// is met by one call, not by every request queued behind the outage, and
// traffic resumes within OpenFor of the backend answering.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// State is where a breaker stands.
type State int

const (
	Closed   State = iota // calls go through
	Open                  // calls fail at once
	HalfOpen              // one probe is in flight; others fail at once
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Defaults of Config.
const (
	DefaultThreshold = 3
	DefaultOpenFor   = 500 * time.Millisecond
)

// Config tunes a Breaker. Zero values take the defaults.
type Config struct {
	// Name is the backend's name, in the error message and the callbacks.
	Name string
	// Threshold is how many outages in a row open the breaker.
	Threshold int
	// OpenFor is how long the breaker stays open before a probe.
	OpenFor time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnState, if set, is told of every change of state. It is called
	// with the breaker's lock held: it must not call the breaker.
	OnState func(name string, s State)
	// OnReject, if set, is told of every call refused while open.
	OnReject func(name string)
}

// Breaker guards one backend. It is safe for concurrent use.
type Breaker struct {
	cfg     Config
	refused error

	mu       sync.Mutex
	state    State
	failures int       // outages in a row while closed
	openedAt time.Time // when it last opened
}

// New returns a closed Breaker.
func New(cfg Config) *Breaker {
	defaults.Positive(&cfg.Threshold, DefaultThreshold)
	defaults.Positive(&cfg.OpenFor, DefaultOpenFor)
	defaults.Clock(&cfg.Now)
	name := cfg.Name
	if name == "" {
		name = "a backend"
	}
	return &Breaker{cfg: cfg, refused: &seckill.Error{Code: seckill.EUNAVAILABLE,
		Message: fmt.Sprintf("%s is unavailable; retry later.", capitalize(name))}}
}

// ErrOpen is wrapped by the error of a call the breaker refused.
var ErrOpen = errors.New("circuit breaker open")

// State returns the breaker's state now.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Allow asks to make one call. On nil the caller must make it and report
// its outcome to done; otherwise the call is refused with an error whose
// code is seckill.EUNAVAILABLE (and which wraps ErrOpen).
func (b *Breaker) Allow() (done func(err error), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return b.closedDone, nil
	case Open:
		if b.cfg.Now().Sub(b.openedAt) >= b.cfg.OpenFor {
			b.set(HalfOpen)
			return b.probeDone, nil
		}
	}
	if b.cfg.OnReject != nil {
		b.cfg.OnReject(b.cfg.Name)
	}
	return nil, fmt.Errorf("%s: %w: %w", b.cfg.Name, b.refused, ErrOpen)
}

// Refusing returns the error Allow would refuse a call with while the
// breaker is not closed, and nil while it is, without taking a probe or
// counting anything: for calls that should fail fast during an outage but
// whose own failures say little about the backend.
func (b *Breaker) Refusing() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Closed {
		return nil
	}
	return fmt.Errorf("%s: %w: %w", b.cfg.Name, b.refused, ErrOpen)
}

// Do runs fn through the breaker.
func Do[T any](ctx context.Context, b *Breaker, fn func(ctx context.Context) (T, error)) (T, error) {
	done, err := b.Allow()
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := fn(ctx)
	done(err)
	return v, err
}

// outage reports whether err says the backend is down. A caller that gave
// up (its context cancelled) says nothing about the backend.
func outage(err error) (isOutage, known bool) {
	switch {
	case err == nil:
		return false, true
	case errors.Is(err, context.Canceled):
		return false, false
	case seckill.ErrorCode(err) == seckill.EUNAVAILABLE, errors.Is(err, context.DeadlineExceeded):
		return true, true
	}
	return false, true // the backend answered, if only with an error
}

func (b *Breaker) closedDone(err error) {
	down, known := outage(err)
	if !known {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Closed { // a probe decided meanwhile
		return
	}
	if !down {
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= b.cfg.Threshold {
		b.open()
	}
}

func (b *Breaker) probeDone(err error) {
	down, known := outage(err)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != HalfOpen {
		return
	}
	switch {
	case !known: // the prober gave up: the next call probes at once
		b.set(Open)
	case down:
		b.open()
	default:
		b.failures = 0
		b.set(Closed)
	}
}

func (b *Breaker) open() {
	b.openedAt = b.cfg.Now()
	b.failures = 0
	b.set(Open)
}

func (b *Breaker) set(s State) {
	if b.state == s {
		return
	}
	b.state = s
	if b.cfg.OnState != nil {
		b.cfg.OnState(b.cfg.Name, s)
	}
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
