package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = fmt.Errorf("dial: %w", &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "down"})

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func call(b *Breaker, err error) error {
	_, cerr := Do(context.Background(), b, func(context.Context) (int, error) { return 0, err })
	return cerr
}

func TestBreaker(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	var states []State
	var rejected atomic.Int64
	b := New(Config{Name: "redis", Threshold: 3, OpenFor: time.Second, Now: c.now,
		OnState:  func(_ string, s State) { states = append(states, s) },
		OnReject: func(string) { rejected.Add(1) }})

	// Errors that are not outages, and outages not in a row, keep it closed.
	for _, err := range []error{nil, errors.New("bad reply"), errDown, errDown, nil, errDown, errDown, context.Canceled} {
		if got := call(b, err); !errors.Is(got, err) && got != err {
			t.Fatalf("closed breaker changed the call's error %v to %v", err, got)
		}
	}
	if b.State() != Closed {
		t.Fatalf("state %s after outages not in a row; want closed", b.State())
	}
	// The third outage in a row opens it; then calls fail at once, unmade.
	call(b, errDown)
	if b.State() != Open {
		t.Fatalf("state %s after %d outages in a row; want open", b.State(), 3)
	}
	made := 0
	_, err := Do(context.Background(), b, func(context.Context) (int, error) { made++; return 0, nil })
	if made != 0 || !errors.Is(err, ErrOpen) || seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("open breaker: made %d calls, err %v; want none and an unavailable error", made, err)
	}
	if msg := seckill.ErrorMessage(err); msg != "Redis is unavailable; retry later." {
		t.Fatalf("message %q", msg)
	}
	if err := b.Refusing(); !errors.Is(err, ErrOpen) {
		t.Fatalf("Refusing while open: %v", err)
	}
	// After OpenFor one probe goes through; the others are still refused.
	c.add(time.Second)
	done, err := b.Allow()
	if err != nil || b.State() != HalfOpen {
		t.Fatalf("after OpenFor: %v, state %s; want a probe", err, b.State())
	}
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("a second call while probing: %v; want refused", err)
	}
	done(errDown) // the probe fails: open again, for another OpenFor
	if b.State() != Open {
		t.Fatalf("after a failed probe: %s", b.State())
	}
	c.add(999 * time.Millisecond)
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatal("reopened breaker let a call through before OpenFor")
	}
	c.add(time.Millisecond)
	done, err = b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(context.Canceled) // the prober gave up: no verdict, the next call probes
	done, err = b.Allow()
	if err != nil {
		t.Fatalf("after an abandoned probe: %v; want the next call to probe", err)
	}
	done(nil) // the backend answers: closed
	if b.State() != Closed || b.Refusing() != nil {
		t.Fatalf("after a good probe: %s", b.State())
	}
	want := []State{Open, HalfOpen, Open, HalfOpen, Open, HalfOpen, Closed}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("states %v; want %v", states, want)
	}
	if rejected.Load() != 3 {
		t.Fatalf("rejected %d; want 3", rejected.Load())
	}
}

// TestBreakerConcurrent: under many callers while the backend is down,
// the backend sees about Threshold calls per OpenFor, not one per caller.
func TestBreakerConcurrent(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	b := New(Config{Threshold: 3, OpenFor: time.Second, Now: c.now})
	var reached atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = Do(context.Background(), b, func(context.Context) (int, error) {
					reached.Add(1)
					return 0, errDown
				})
			}
		}()
	}
	wg.Wait()
	// Calls let through while closed may all be in flight together before
	// the first outage is counted; at most 64 then, plus none once open.
	if n := reached.Load(); n > 64 {
		t.Fatalf("the backend saw %d of 6400 calls while down; want at most 64", n)
	}
}
