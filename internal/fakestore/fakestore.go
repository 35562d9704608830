// Package fakestore holds in-memory fakes of the sale and stock stores for
// the tests of the HTTP packages (httpapi, web), which serve from the same
// two ports. Each fake hands out copies, as a real store does, fails every
// call with Err when it is set, and records what tests assert on. Tests
// that change Err or a map while requests run hold Mu.
package fakestore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
)

// Sales is an in-memory seckill.SaleStore, held to the store's conformance
// suite like the real ones (fakestore_test.go).
type Sales struct {
	Mu        sync.Mutex
	Rows      map[string]*seckill.Sale
	Err       error // returned by every call when set
	SaleCalls atomic.Int64
	Created   []*seckill.Sale // by CreateSale, in order
	// Now stamps CreatedAt (time.Now when nil), as sqlstore's DB.Now
	// does; a test with a clock of its own sets it before first use.
	Now func() time.Time
}

// NewSales returns an empty Sales.
func NewSales() *Sales { return &Sales{Rows: map[string]*seckill.Sale{}} }

// CreateSale stores a copy of s, with nothing sold yet, as the real store
// does: version 1, stamped now, times kept to the millisecond in UTC
// (conformance.SaleStore holds it to that).
func (f *Sales) CreateSale(_ context.Context, s *seckill.Sale) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if _, ok := f.Rows[s.ID]; ok {
		return seckill.ErrDuplicate
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	s.Unsold, s.Version, s.CreatedAt = s.Stock, 1, stored(now())
	c := *s
	c.StartAt, c.EndAt = stored(c.StartAt), stored(c.EndAt)
	f.Rows[s.ID] = &c
	f.Created = append(f.Created, &c)
	return nil
}

// Sale returns a copy of the sale id, counting the call.
func (f *Sales) Sale(_ context.Context, id string) (*seckill.Sale, error) {
	f.SaleCalls.Add(1)
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	return Copy(f.Rows, id)
}

// SalesStartingBefore lists copies of the sales with StartAt <= t and
// EndAt > now.
func (f *Sales) SalesStartingBefore(_ context.Context, t, now time.Time) ([]*seckill.Sale, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return nil, f.Err
	}
	var out []*seckill.Sale
	for _, s := range f.Rows {
		if !s.StartAt.After(t) && s.EndAt.After(now) {
			c := *s
			out = append(out, &c)
		}
	}
	return out, nil
}

// stored is t as a store keeps it: milliseconds, in UTC.
func stored(t time.Time) time.Time { return t.Truncate(time.Millisecond).UTC() }

// Put stores a copy of s as it is, replacing any sale of its id.
func (f *Sales) Put(s *seckill.Sale) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	c := *s
	f.Rows[s.ID] = &c
}

// Stock is an in-memory stock store: Preheat and Stock.
type Stock struct {
	Mu       sync.Mutex
	Levels   map[string]seckill.StockLevel
	Preheats []string // sale ids, in the order Preheat was called
	Err      error    // returned by every call when set
}

// NewStock returns an empty Stock.
func NewStock() *Stock { return &Stock{Levels: map[string]seckill.StockLevel{}} }

// Preheat loads s's stock unless it is loaded already, as the real store does.
func (f *Stock) Preheat(_ context.Context, s *seckill.Sale) (bool, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return false, f.Err
	}
	f.Preheats = append(f.Preheats, s.ID)
	if _, ok := f.Levels[s.ID]; ok {
		return false, nil
	}
	f.Levels[s.ID] = seckill.StockLevel{Total: s.Stock}
	return true, nil
}

// Stock returns the level of the sale id.
func (f *Stock) Stock(_ context.Context, id string) (seckill.StockLevel, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return seckill.StockLevel{}, f.Err
	}
	l, ok := f.Levels[id]
	if !ok {
		return seckill.StockLevel{}, seckill.ErrNotFound
	}
	return l, nil
}

// Set sets the level of the sale id.
func (f *Stock) Set(id string, l seckill.StockLevel) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Levels[id] = l
}

// Copy returns a copy of rows[id], or seckill.ErrNotFound: a fake's
// lookup, so that a caller's changes never reach the stored row. The
// caller holds the lock that guards rows.
func Copy[T any](rows map[string]*T, id string) (*T, error) {
	v, ok := rows[id]
	if !ok {
		return nil, seckill.ErrNotFound
	}
	c := *v
	return &c, nil
}
