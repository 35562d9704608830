package httpapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ttlcache"
)

// saleCacheMax bounds the cache. A flood of made-up sale ids is cached as
// "not found" like any other answer; past this many entries the expired
// ones, and then some others, make room (internal/ttlcache).
const saleCacheMax = 10_000

const saleCacheShards = 16

// saleLoadTimeout bounds one database read made for the cache. The read is
// shared by every request waiting for that sale, so it does not use any
// one request's deadline.
const saleLoadTimeout = 5 * time.Second

// saleLoadRate and saleLoadBurst bound the database reads a node's cache
// makes, per second: a flood of made-up ids, each a miss, would otherwise
// cost a read each. Legitimate misses are about one a live sale a TTL.
const (
	saleLoadRate  = 200
	saleLoadBurst = 200
)

// errSaleLoadsBusy answers a miss beyond the load budget: the sale may
// exist, so not 404.
var errSaleLoadsBusy = &retryError{err: seckill.Errorf(seckill.EOVERLOADED, "Too many unknown sales asked for at once; retry shortly."), after: time.Second}

// saleCache keeps sale rows, and "no such sale" answers, for a short TTL,
// so a page-refresh storm costs one database read per id per TTL.
// Concurrent misses for one id share one read, and misses read at most
// saleLoadRate ids a second (a garbage-id flood): beyond it a sale loaded
// before is answered with its last row, and any other id with 503.
//
// Cached sales are shared: callers must not modify them.
type saleCache struct {
	load func(ctx context.Context, id string) (*seckill.Sale, error)
	ttl  time.Duration
	now  func() time.Time

	entries *ttlcache.Cache[saleAnswer]
	loads   singleflight.Group
	budget  *rate.Limiter // of loads
	// forgets counts forget calls: a load that a forget overtook answers
	// its waiters but is not kept, so the next read sees the change.
	forgets atomic.Uint64

	mu sync.RWMutex
	// good keeps the last row each sale was loaded with, and when, for
	// the public sale view to serve while the database is down.
	good map[string]goodSale
}

// saleAnswer is one load's answer: a sale, or seckill.ErrNotFound.
type saleAnswer struct {
	sale *seckill.Sale
	err  error
}

type goodSale struct {
	sale *seckill.Sale
	at   time.Time
}

func newSaleCache(load func(context.Context, string) (*seckill.Sale, error), ttl time.Duration, now func() time.Time) *saleCache {
	return &saleCache{load: load, ttl: ttl, now: now, budget: rate.NewLimiter(saleLoadRate, saleLoadBurst),
		entries: ttlcache.New[saleAnswer](saleCacheShards, saleCacheMax/saleCacheShards), good: map[string]goodSale{}}
}

// get returns the sale, seckill.ErrNotFound, or a load failure.
func (c *saleCache) get(ctx context.Context, id string) (*seckill.Sale, error) {
	if a, _, ok := c.entries.Get(id, c.now()); ok {
		return a.sale, a.err
	}
	a, err := sharedRead(ctx, &c.loads, id, saleLoadTimeout, func(lctx context.Context) (saleAnswer, error) {
		return c.fill(lctx, id)
	})
	if errors.Is(err, errSaleLoadsBusy) {
		if sale, _, ok := c.lastGood(id); ok {
			return sale, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return a.sale, a.err
}

// sharedRead makes read once for all the callers that ask for key at the
// same time (g). The read is shared, so it runs on its own clock (timeout),
// not on the context of the caller that began it, which may hang up; each
// caller waits for it only as long as its own ctx lets it.
func sharedRead[T any](ctx context.Context, g *singleflight.Group, key string, timeout time.Duration, read func(context.Context) (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return read(rctx)
	})
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// fill loads id and keeps the answer, unless it is a failure (failures are
// not cached; the next request retries).
func (c *saleCache) fill(ctx context.Context, id string) (saleAnswer, error) {
	if !c.budget.AllowN(c.now(), 1) {
		return saleAnswer{}, errSaleLoadsBusy
	}
	gen := c.forgets.Load()
	sale, err := c.load(ctx, id)
	switch {
	case err == nil && sale == nil:
		return saleAnswer{}, errors.New("sale store returned no sale and no error")
	case errors.Is(err, seckill.ErrNotFound):
		sale, err = nil, seckill.ErrNotFound
	case err != nil:
		return saleAnswer{}, err
	}
	a := saleAnswer{sale: sale, err: err}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets.Load() != gen {
		return a, nil
	}
	now := c.now()
	c.entries.Put(id, a, now.Add(c.ttl), now)
	if err == nil {
		if len(c.good) >= saleCacheMax {
			clear(c.good) // bounded like the entries; only real sales land here
		}
		c.good[id] = goodSale{sale: sale, at: now}
	} else { // the sale is gone
		delete(c.good, id)
	}
	return a, nil
}

// lastGood returns the last row id was loaded with and when; ok is false
// when it never was (or has been swept).
func (c *saleCache) lastGood(id string) (sale *seckill.Sale, at time.Time, ok bool) {
	c.mu.RLock()
	g, ok := c.good[id]
	c.mu.RUnlock()
	return g.sale, g.at, ok
}

// forget drops id, so the next read sees a sale just created here.
func (c *saleCache) forget(id string) {
	c.mu.Lock()
	c.forgets.Add(1)
	c.entries.Delete(id)
	delete(c.good, id)
	c.mu.Unlock()
	c.loads.Forget(id)
}

// CachedSales reads sales through the API's cache: for the pages served
// beside it (internal/web), so that a refresh storm on a sale's page, or a
// flood of made-up ids, costs the database what the API's routes cost it.
type CachedSales struct{ c *saleCache }

// CachedSales returns s's sale cache as a reader.
func (s *Server) CachedSales() CachedSales { return CachedSales{s.cache} }

// Sale returns the sale, seckill.ErrNotFound, or a load failure. The sale
// is shared: the caller must not modify it.
func (cs CachedSales) Sale(ctx context.Context, id string) (*seckill.Sale, error) {
	return cs.c.get(ctx, id)
}
