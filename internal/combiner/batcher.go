package combiner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// Batcher is the combiner's group commit for calls other than claims (a
// lottery's entries): per key, at most one call in flight; requests that
// arrive meanwhile go together in the next call. The claim path keeps its
// own Combiner, whose code is tuned for it and which this does not touch.
type Batcher[Q, R any] struct {
	do  func(ctx context.Context, key string, batch []Q) ([]R, error)
	cfg Config

	mu     sync.Mutex
	lanes  map[string]*batchLane[Q, R]
	closed bool
	busy   sync.WaitGroup
}

type batchLane[Q, R any] struct{ pending []*batchCall[Q, R] }

type batchCall[Q, R any] struct {
	req  Q
	res  R
	err  error
	done chan struct{}
}

// NewBatcher returns a Batcher that makes its calls with do, which must
// answer each request of the batch in order. Config's MaxBatch,
// CallTimeout and OnBatch apply as for a Combiner.
func NewBatcher[Q, R any](do func(ctx context.Context, key string, batch []Q) ([]R, error), cfg Config) *Batcher[Q, R] {
	defaults.Positive(&cfg.MaxBatch, 256)
	defaults.Positive(&cfg.CallTimeout, 2*time.Second)
	return &Batcher[Q, R]{do: do, cfg: cfg, lanes: make(map[string]*batchLane[Q, R])}
}

// Do decides req in a batch of key. If ctx ends while it waits, Do returns
// ctx.Err(), but req still runs in its batch.
func (b *Batcher[Q, R]) Do(ctx context.Context, key string, req Q) (R, error) {
	cl := &batchCall[Q, R]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		var zero R
		return zero, fmt.Errorf("batcher: %w", seckill.ErrClosed)
	}
	if l, inFlight := b.lanes[key]; inFlight {
		l.pending = append(l.pending, cl)
		b.mu.Unlock()
		select {
		case <-cl.done:
			return cl.res, cl.err
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
	return cl.res, cl.err
}

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
		err = fmt.Errorf("batcher: %d answers to %d requests", len(results), len(reqs))
	}
	if b.cfg.OnBatch != nil {
		b.cfg.OnBatch(len(batch), time.Since(start), err)
	}
	for i, cl := range batch {
		if err != nil {
			cl.err = err
		} else {
			cl.res = results[i]
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
	go b.run(key, l, next)
}

// Stop refuses new requests and waits for those queued and in flight, or
// for ctx. Safe to call more than once.
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
		return fmt.Errorf("batcher: stop: %w", ctx.Err())
	}
}
