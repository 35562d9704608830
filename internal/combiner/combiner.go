// Package combiner owns the request combiner of design §3
// (docs/design.md): per sale, at most one stock-store call is in flight on
// this node; requests that arrive while it runs wait and go together in
// the next call.
//
// This is group commit applied to a hot Redis key. At low load a request
// finds no call in flight and goes alone at once, so batching adds no
// latency; under a stampede batches grow by themselves and Redis runs one
// script per batch instead of one per request.
package combiner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// The combiner decides one request at a time for its callers.
var _ seckill.Reserver = (*Combiner)(nil)

// BatchReserver is the part of seckill.StockStore the combiner calls.
type BatchReserver interface {
	Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error)
}

// Config tunes a Combiner. Zero values take the defaults.
type Config struct {
	// MaxBatch caps the requests in one call. Default 256.
	MaxBatch int
	// CallTimeout bounds one stock-store call. It is deliberately not the
	// caller's context: one buyer hanging up must not fail the batch of
	// everyone else. Default 2s.
	CallTimeout time.Duration
	// OnBatch, if set, is told the size, duration and error of every call.
	OnBatch func(size int, took time.Duration, err error)
	// Hold, if set, is given every call's results as soon as the call
	// returns; a non-nil wait it returns is run by each request of the
	// batch before it is answered (with that request's context), while
	// the next batch already runs. The embedded store answers a claim
	// only once it is stored this way (internal/ackgate).
	Hold func(results []seckill.ReserveResult) (wait func(context.Context) error)
}

// Combiner batches concurrent reservations per sale. It has no goroutine of
// its own while idle: the request that finds its sale's lane idle runs the
// call itself, and a finished call hands any waiting requests to a new
// goroutine as the next batch.
type Combiner struct {
	store BatchReserver
	cfg   Config

	mu     sync.Mutex
	lanes  map[string]*lane
	closed bool
	busy   sync.WaitGroup // one count per lane with a call in flight
}

// lane is one sale's queue. A lane exists only while a call is in flight;
// its fields are guarded by Combiner.mu.
type lane struct {
	pending []*call
}

type call struct {
	req  seckill.ReserveRequest
	res  seckill.ReserveResult
	err  error
	wait func(context.Context) error // Config.Hold's, if any
	done chan struct{}
}

// answer is cl's outcome once its batch's wait, if any, is over.
func (cl *call) answer(ctx context.Context) (seckill.ReserveResult, error) {
	if cl.err != nil || cl.wait == nil {
		return cl.res, cl.err
	}
	if err := cl.wait(ctx); err != nil {
		return seckill.ReserveResult{}, err
	}
	return cl.res, nil
}

// New returns a Combiner in front of store.
func New(store BatchReserver, cfg Config) *Combiner {
	defaults.Positive(&cfg.MaxBatch, 256)
	defaults.Positive(&cfg.CallTimeout, 2*time.Second)
	return &Combiner{store: store, cfg: cfg, lanes: make(map[string]*lane)}
}

// Reserve decides one request, batched with whatever else is waiting for
// the same sale. If ctx ends while the request waits, Reserve returns
// ctx.Err(), but the request still runs in its batch: its outcome is then
// known only to an idempotent replay.
func (c *Combiner) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	cl := &call{req: req, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return seckill.ReserveResult{}, fmt.Errorf("combiner: %w", seckill.ErrClosed)
	}
	if l, inFlight := c.lanes[saleID]; inFlight {
		l.pending = append(l.pending, cl)
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.answer(ctx)
		case <-ctx.Done():
			return seckill.ReserveResult{}, ctx.Err()
		}
	}
	l := &lane{}
	c.lanes[saleID] = l
	c.busy.Add(1)
	c.mu.Unlock()

	c.run(saleID, l, []*call{cl})
	return cl.answer(ctx)
}

// run makes one store call for batch, answers it, and passes the requests
// that queued meanwhile to a new goroutine, or retires the lane.
func (c *Combiner) run(saleID string, l *lane, batch []*call) {
	reqs := make([]seckill.ReserveRequest, len(batch))
	for i, cl := range batch {
		reqs[i] = cl.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CallTimeout)
	start := time.Now()
	results, err := c.store.Reserve(ctx, saleID, reqs)
	cancel()
	if err == nil && len(results) != len(reqs) {
		err = fmt.Errorf("combiner: store answered %d of %d requests", len(results), len(reqs))
	}
	if c.cfg.OnBatch != nil {
		c.cfg.OnBatch(len(batch), time.Since(start), err)
	}
	var wait func(context.Context) error
	if err == nil && c.cfg.Hold != nil {
		wait = c.cfg.Hold(results)
	}
	for i, cl := range batch {
		if err != nil {
			cl.err = err
		} else {
			cl.res, cl.wait = results[i], wait
		}
		close(cl.done)
	}

	c.mu.Lock()
	if len(l.pending) == 0 {
		delete(c.lanes, saleID)
		c.mu.Unlock()
		c.busy.Done()
		return
	}
	next := l.pending
	if len(next) > c.cfg.MaxBatch {
		next, l.pending = next[:c.cfg.MaxBatch:c.cfg.MaxBatch], next[c.cfg.MaxBatch:]
	} else {
		l.pending = nil
	}
	c.mu.Unlock()
	// The request that ran this call has its answer; it must not wait for
	// the next batch, so that batch gets a goroutine of its own.
	go c.run(saleID, l, next)
}

// Stop refuses new requests and waits until every call in flight and every
// request already queued has been answered, or ctx ends. Safe to call more
// than once.
func (c *Combiner) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	drained := make(chan struct{})
	go func() { c.busy.Wait(); close(drained) }()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("combiner: stop: %w", ctx.Err())
	}
}
