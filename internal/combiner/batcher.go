package combiner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// Batcher is the group commit every combiner of this package runs on
// (claims, a lottery's entries, a waiting room's joins): per key, at most
// one call in flight; requests that arrive meanwhile go together in the
// next call. It has no goroutine of its own while idle: the request that
// finds its key's lane idle runs the call itself, and a finished call
// hands any waiting requests to a new goroutine as the next batch.
type Batcher[Q, R any] struct {
	do   func(ctx context.Context, key string, batch []Q) ([]R, error)
	hold func(results []R) (wait func(context.Context) error) // Config.Hold, for claims
	cfg  Config

	mu     sync.Mutex
	lanes  map[string]*batchLane[Q, R]
	closed bool
	busy   sync.WaitGroup // one count per lane with a call in flight
}

// batchLane is one key's queue. A lane exists only while a call is in
// flight; its fields are guarded by Batcher.mu.
type batchLane[Q, R any] struct{ pending []*batchCall[Q, R] }

type batchCall[Q, R any] struct {
	req  Q
	res  R
	err  error
	wait func(context.Context) error // the hold's, if any
	done chan struct{}
}

// answer is cl's outcome once its batch's wait, if any, is over.
func (cl *batchCall[Q, R]) answer(ctx context.Context) (R, error) {
	if cl.err != nil || cl.wait == nil {
		return cl.res, cl.err
	}
	if err := cl.wait(ctx); err != nil {
		var zero R
		return zero, err
	}
	return cl.res, nil
}

// NewBatcher returns a Batcher that makes its calls with do, which must
// answer each request of the batch in order. Config's MaxBatch,
// CallTimeout and OnBatch apply as for a Combiner; Hold is the claims'
// alone (New).
func NewBatcher[Q, R any](do func(ctx context.Context, key string, batch []Q) ([]R, error), cfg Config) *Batcher[Q, R] {
	return newBatcher(do, cfg, nil)
}

func newBatcher[Q, R any](do func(ctx context.Context, key string, batch []Q) ([]R, error), cfg Config, hold func([]R) func(context.Context) error) *Batcher[Q, R] {
	defaults.Positive(&cfg.MaxBatch, 256)
	defaults.Positive(&cfg.CallTimeout, 2*time.Second)
	return &Batcher[Q, R]{do: do, hold: hold, cfg: cfg, lanes: make(map[string]*batchLane[Q, R])}
}

// Do decides req in a batch of key. If ctx ends while it waits, Do returns
// ctx.Err(), but req still runs in its batch: its outcome is then known
// only to an idempotent replay.
func (b *Batcher[Q, R]) Do(ctx context.Context, key string, req Q) (R, error) {
	cl := &batchCall[Q, R]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		var zero R
		return zero, fmt.Errorf("combiner: %w", seckill.ErrClosed)
	}
	if l, inFlight := b.lanes[key]; inFlight {
		l.pending = append(l.pending, cl)
		b.mu.Unlock()
		select {
		case <-cl.done:
			return cl.answer(ctx)
		case <-ctx.Done():
			var zero R
			return zero, ctx.Err()
		}
	}
	l := &batchLane[Q, R]{}
	b.lanes[key] = l
	b.busy.Add(1)
	b.mu.Unlock()
	b.run(key, l, []*batchCall[Q, R]{cl})
	return cl.answer(ctx)
}

// run makes one call for batch, answers it, and passes the requests that
// queued meanwhile to a new goroutine, or retires the lane. The call's
// context is its own, not a caller's: one buyer hanging up must not fail
// the batch of everyone else.
func (b *Batcher[Q, R]) run(key string, l *batchLane[Q, R], batch []*batchCall[Q, R]) {
	reqs := make([]Q, len(batch))
	for i, cl := range batch {
		reqs[i] = cl.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.CallTimeout)
	start := time.Now()
	results, err := b.do(ctx, key, reqs)
	cancel()
	if err == nil && len(results) != len(reqs) {
		err = fmt.Errorf("combiner: %d answers to %d requests", len(results), len(reqs))
	}
	if b.cfg.OnBatch != nil {
		b.cfg.OnBatch(len(batch), time.Since(start), err)
	}
	var wait func(context.Context) error
	if err == nil && b.hold != nil {
		wait = b.hold(results)
	}
	for i, cl := range batch {
		if err != nil {
			cl.err = err
		} else {
			cl.res, cl.wait = results[i], wait
		}
		close(cl.done)
	}
	b.mu.Lock()
	if len(l.pending) == 0 {
		delete(b.lanes, key)
		b.mu.Unlock()
		b.busy.Done()
		return
	}
	next := l.pending
	if len(next) > b.cfg.MaxBatch {
		next, l.pending = next[:b.cfg.MaxBatch:b.cfg.MaxBatch], next[b.cfg.MaxBatch:]
	} else {
		l.pending = nil
	}
	b.mu.Unlock()
	// The request that ran this call has its answer; it must not wait for
	// the next batch, so that batch gets a goroutine of its own.
	go b.run(key, l, next)
}

// Stop refuses new requests and waits until every call in flight and every
// request already queued has been answered, or ctx ends. Safe to call more
// than once.
func (b *Batcher[Q, R]) Stop(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	drained := make(chan struct{})
	go func() { b.busy.Wait(); close(drained) }()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("combiner: stop: %w", ctx.Err())
	}
}
