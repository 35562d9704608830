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

	"github.com/seckill-dev/seckill"
)

// Sales is an in-memory seckill.SaleStore (the parts the HTTP packages call).
type Sales struct {
	Mu        sync.Mutex
	Rows      map[string]*seckill.Sale
	Err       error // returned by every call when set
	SaleCalls atomic.Int64
	Created   []*seckill.Sale // by CreateSale, in order
}

// NewSales returns an empty Sales.
func NewSales() *Sales { return &Sales{Rows: map[string]*seckill.Sale{}} }

// CreateSale stores a copy of s, with nothing sold yet, as the real store does.
func (f *Sales) CreateSale(_ context.Context, s *seckill.Sale) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if _, ok := f.Rows[s.ID]; ok {
		return seckill.ErrDuplicate
	}
	s.Unsold = s.Stock
	c := *s
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
