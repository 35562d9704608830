package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// saleCacheMax bounds the cache. A flood of made-up sale ids is cached as
// "not found" like any other answer; past this many entries the expired
// ones are swept, and if that is not enough the cache starts over.
const saleCacheMax = 10_000

// saleLoadTimeout bounds one database read made for the cache. The read is
// shared by every request waiting for that sale, so it does not use any
// one request's deadline.
const saleLoadTimeout = 5 * time.Second

// saleCache keeps sale rows, and "no such sale" answers, for a short TTL,
// so a page-refresh storm or a garbage-id flood costs one database read
// per id per TTL. Concurrent misses for one id share one read.
//
// Cached sales are shared: callers must not modify them.
type saleCache struct {
	load func(ctx context.Context, id string) (*seckill.Sale, error)
	ttl  time.Duration
	now  func() time.Time

	mu      sync.RWMutex
	entries map[string]*saleEntry
	// good keeps the last row each sale was loaded with, and when, for
	// the public sale view to serve while the database is down.
	good map[string]goodSale
}

type goodSale struct {
	sale *seckill.Sale
	at   time.Time
}

var errSaleLoadPanicked = errors.New("sale load panicked")

type saleEntry struct {
	ready   chan struct{} // closed once sale, err and expires are set
	sale    *seckill.Sale
	err     error // nil, seckill.ErrNotFound, or a failure (then not kept)
	expires time.Time
}

func newSaleCache(load func(context.Context, string) (*seckill.Sale, error), ttl time.Duration, now func() time.Time) *saleCache {
	return &saleCache{load: load, ttl: ttl, now: now, entries: map[string]*saleEntry{}, good: map[string]goodSale{}}
}

// get returns the sale, seckill.ErrNotFound, or a load failure.
func (c *saleCache) get(ctx context.Context, id string) (*seckill.Sale, error) {
	c.mu.RLock()
	e := c.entries[id]
	c.mu.RUnlock()
	if e != nil {
		select {
		case <-e.ready:
			if c.now().Before(e.expires) {
				return e.sale, e.err
			}
		default:
			return c.wait(ctx, e)
		}
	}

	c.mu.Lock()
	// Another request may have started a load meanwhile.
	if cur := c.entries[id]; cur != nil && cur != e {
		c.mu.Unlock()
		return c.wait(ctx, cur)
	}
	if len(c.entries) >= saleCacheMax {
		c.sweepLocked()
	}
	e = &saleEntry{ready: make(chan struct{})}
	c.entries[id] = e
	c.mu.Unlock()

	// The load is shared, so it runs on its own clock; this request, like
	// every other waiting for it, waits only as long as its own context
	// lets it.
	go c.fill(ctx, id, e)
	return c.wait(ctx, e)
}

// lastGood returns the last row id was loaded with and when; ok is false
// when it never was (or has been swept).
func (c *saleCache) lastGood(id string) (sale *seckill.Sale, at time.Time, ok bool) {
	c.mu.RLock()
	g, ok := c.good[id]
	c.mu.RUnlock()
	return g.sale, g.at, ok
}

func (c *saleCache) fill(ctx context.Context, id string, e *saleEntry) {
	// Until load returns, e holds a failure: if load panics, waiters must
	// not see a nil sale with a nil error.
	e.err = errSaleLoadPanicked
	failed := true
	defer func() {
		c.mu.Lock()
		if failed && c.entries[id] == e {
			delete(c.entries, id) // failures are not cached; the next request retries
		}
		switch {
		case !failed && e.err == nil:
			c.good[id] = goodSale{sale: e.sale, at: c.now()}
		case !failed: // the sale is gone
			delete(c.good, id)
		}
		close(e.ready)
		c.mu.Unlock()
	}()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saleLoadTimeout)
	defer cancel()
	sale, err := c.load(lctx, id)
	switch {
	case err == nil && sale == nil:
		err = errors.New("sale store returned no sale and no error")
	case errors.Is(err, seckill.ErrNotFound):
		sale, err = nil, seckill.ErrNotFound
	}
	e.sale, e.err = sale, err
	e.expires = c.now().Add(c.ttl)
	failed = err != nil && err != seckill.ErrNotFound
}

func (c *saleCache) wait(ctx context.Context, e *saleEntry) (*seckill.Sale, error) {
	select {
	case <-e.ready:
		return e.sale, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forget drops id, so the next read sees a sale just created here.
func (c *saleCache) forget(id string) {
	c.mu.Lock()
	delete(c.entries, id)
	delete(c.good, id)
	c.mu.Unlock()
}

func (c *saleCache) sweepLocked() {
	now := c.now()
	for id, e := range c.entries {
		select {
		case <-e.ready:
			if !now.Before(e.expires) {
				delete(c.entries, id)
			}
		default:
		}
	}
	if len(c.good) >= saleCacheMax {
		clear(c.good) // bounded like the entries; only real sales land here
	}
	if len(c.entries) >= saleCacheMax*3/4 {
		// Mostly fresh entries: a flood of distinct ids. Starting over is
		// cheaper than an LRU and costs at most one read per id again.
		for id, e := range c.entries {
			select {
			case <-e.ready:
				delete(c.entries, id)
			default:
			}
		}
	}
}
