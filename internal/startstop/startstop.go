// Package startstop is the one way a background worker of seckill starts
// and stops (river's startstop is the model). A worker holds a Worker and
// calls it from its own Start and Stop:
//
//   - Start runs the worker's loop on a goroutine of its own, once. Any
//     later Start, including one after Stop, does nothing: a stopped worker
//     stays stopped, and a second Start cannot leak a second loop.
//   - Stop cancels the loop's context and waits for the loop to return, or
//     for its own ctx. Drain instead asks the loop to finish by itself
//     (Stopping is closed) and cancels only when its ctx ends. Both are
//     safe to call twice, concurrently, and without Start.
//
// A loop waits with Every (a tick, or a wake) and Sleep (a pause that ends
// with its context).
package startstop

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Worker is the start/stop state of one background loop. The zero value
// is ready to use; a Worker must not be copied after first use.
type Worker struct {
	mu       sync.Mutex
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	stopping chan struct{} // closed by the first Stop or Drain
	done     chan struct{} // closed when run has returned
}

func (w *Worker) init() {
	if w.stopping == nil {
		w.stopping = make(chan struct{})
		w.done = make(chan struct{})
	}
}

// Start runs run on a new goroutine with a context that ends when ctx does
// or when Stop cancels it. It reports whether it did: only the first Start
// of a Worker not yet stopped runs anything.
func (w *Worker) Start(ctx context.Context, run func(ctx context.Context)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	if w.started || w.stopped {
		return false
	}
	w.started = true
	ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		defer w.cancel()
		run(ctx)
	}()
	return true
}

// Started reports whether Start ran the loop.
func (w *Worker) Started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

// Stopping returns a channel closed once Stop or Drain has been called.
func (w *Worker) Stopping() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	return w.stopping
}

// Stop cancels the loop's context and waits until the loop has returned,
// or ctx ends (then it returns ctx.Err() and the loop ends on its own).
func (w *Worker) Stop(ctx context.Context) error {
	cancel, done := w.markStopped()
	if cancel == nil {
		return nil
	}
	cancel()
	return wait(ctx, done)
}

// StopNamed is Stop for a worker called name: its error says whose stop
// it was ("<name>: stop: …"), as a worker's own Stop returns it.
func (w *Worker) StopNamed(ctx context.Context, name string) error {
	if err := w.Stop(ctx); err != nil {
		return fmt.Errorf("%s: stop: %w", name, err)
	}
	return nil
}

// Drain closes Stopping and waits for the loop to return by itself. If ctx
// ends first, it cancels the loop's context, waits for the loop to return,
// and returns ctx.Err().
func (w *Worker) Drain(ctx context.Context) error {
	cancel, done := w.markStopped()
	if cancel == nil {
		return nil
	}
	if err := wait(ctx, done); err != nil {
		cancel()
		<-done
		return err
	}
	return nil
}

// markStopped records the first Stop or Drain and returns the loop's
// cancel and done, or a nil cancel when no loop was started.
func (w *Worker) markStopped() (context.CancelFunc, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	if !w.stopped {
		w.stopped = true
		close(w.stopping)
	}
	if !w.started {
		return nil, nil
	}
	return w.cancel, w.done
}

func wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StartEvery starts a loop that calls fn at once, then every interval
// (see Every), until Stop. It reports whether it started, as Start does.
func (w *Worker) StartEvery(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) bool {
	return w.Start(ctx, func(ctx context.Context) {
		fn(ctx)
		Every(ctx, interval, nil, fn)
	})
}

// Every calls fn every interval, and at once whenever wake delivers (a nil
// wake never does), until ctx ends. It does not call fn at first: a loop
// that should work at once calls fn itself before Every (StartEvery does).
func Every(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		if ctx.Err() != nil {
			return
		}
		fn(ctx)
	}
}

// Closed reports, without waiting, whether ch is closed: whether the stop
// (or close) it signals has begun.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Sleep pauses for d, or until ctx ends: it returns nil once d has passed
// and ctx.Err() if ctx ended first. A d of zero or less does not wait, and
// returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
