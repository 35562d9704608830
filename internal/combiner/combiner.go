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
	"time"

	"github.com/seckill-dev/seckill"
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

// Combiner batches concurrent reservations per sale: a Batcher whose key
// is the sale and whose call is the stock store's Reserve.
type Combiner struct {
	b *Batcher[seckill.ReserveRequest, seckill.ReserveResult]
}

// New returns a Combiner in front of store.
func New(store BatchReserver, cfg Config) *Combiner {
	return &Combiner{b: newBatcher(store.Reserve, cfg, cfg.Hold)}
}

// Reserve decides one request, batched with whatever else is waiting for
// the same sale. If ctx ends while the request waits, Reserve returns
// ctx.Err(), but the request still runs in its batch: its outcome is then
// known only to an idempotent replay.
func (c *Combiner) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return c.b.Do(ctx, saleID, req)
}

// Stop refuses new requests and waits until every call in flight and every
// request already queued has been answered, or ctx ends. Safe to call more
// than once.
func (c *Combiner) Stop(ctx context.Context) error { return c.b.Stop(ctx) }
