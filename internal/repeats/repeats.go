// Package repeats answers a buyer's repeated lottery entry or waiting-room
// join from memory once this node has seen the answer: an entry never
// changes once made, and a place in the queue is final once the sale has
// started (seckill.QueuePlaceSettled). Only a buyer's first entry or join
// on a node costs a stock-store call, and so does one the memory dropped.
//
// The memory is bounded: at most Config.MaxSales sales of Config.PerSale
// buyers each. A full sale drops arbitrary buyers down to 7/8 of it, as
// internal/ttlcache does; a sale's answers are dropped with it once they
// lapse (entries close, the sale ends).
package repeats

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
)

// Defaults of Config: a full sale holds some 25 MB (about 100 bytes a
// buyer), so the worst case is some 400 MB.
const (
	DefaultMaxSales = 16
	DefaultPerSale  = 1 << 18
)

// Config tunes an Enterer or a Queuer. Zero values take the defaults.
type Config struct {
	MaxSales int
	PerSale  int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// SettleMargin is seckill.QueuePlaceSettled's margin. Default
	// seckill.QueueSettleMargin.
	SettleMargin time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxSales <= 0 {
		c.MaxSales = DefaultMaxSales
	}
	if c.PerSale <= 0 {
		c.PerSale = DefaultPerSale
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SettleMargin <= 0 {
		c.SettleMargin = seckill.QueueSettleMargin
	}
	return c
}

// Enterer is a seckill.Enterer in front of another that answers a buyer's
// second entry from memory: their first entry, as the stock store would.
// A repeat is answered even after the draw closed entries early (the
// stock store would refuse it): the entry it names is in the draw.
type Enterer struct {
	next  seckill.Enterer
	known known[entry]
	now   func() time.Time
	hits  atomic.Uint64
}

type entry struct {
	id  string
	qty int64
}

var _ seckill.Enterer = (*Enterer)(nil)

// NewEnterer returns an Enterer in front of next.
func NewEnterer(next seckill.Enterer, cfg Config) *Enterer {
	cfg = cfg.withDefaults()
	return &Enterer{next: next, known: newKnown[entry](cfg), now: cfg.Now}
}

// Enter answers req from memory when the buyer's entry is known, and asks
// next otherwise.
func (e *Enterer) Enter(ctx context.Context, s *seckill.Sale, req seckill.EntryRequest) (seckill.EntryResult, error) {
	now := e.now()
	if known, ok := e.KnownEntry(s.ID, req.UserID, now); ok {
		return seckill.EntryResult{Entry: known}, nil
	}
	res, err := e.next.Enter(ctx, s, req)
	if err == nil && res.Refused == "" && res.Entry.ID != "" {
		e.known.put(s.ID, req.UserID, entry{id: res.Entry.ID, qty: res.Entry.Qty}, seckill.EntryKnownUntil(s), now)
	}
	return res, err
}

// KnownEntry returns the buyer's entry into the sale when it is known at
// now, so that a caller can answer it before anything that costs more.
func (e *Enterer) KnownEntry(saleID, userID string, now time.Time) (seckill.LotteryEntry, bool) {
	v, ok := e.known.get(saleID, userID, now)
	if !ok {
		return seckill.LotteryEntry{}, false
	}
	e.hits.Add(1)
	return seckill.LotteryEntry{ID: v.id, UserID: userID, Qty: v.qty}, true
}

// Hits counts the entries answered from memory.
func (e *Enterer) Hits() uint64 { return e.hits.Load() }

// Queuer is a seckill.Queuer in front of another that answers a buyer's
// join from memory once their place is final: the same place.
type Queuer struct {
	next   seckill.Queuer
	known  known[int64]
	now    func() time.Time
	margin time.Duration
	hits   atomic.Uint64
}

var _ seckill.Queuer = (*Queuer)(nil)

// NewQueuer returns a Queuer in front of next.
func NewQueuer(next seckill.Queuer, cfg Config) *Queuer {
	cfg = cfg.withDefaults()
	return &Queuer{next: next, known: newKnown[int64](cfg), now: cfg.Now, margin: cfg.SettleMargin}
}

// Join answers req from memory when the buyer's final place is known, and
// asks next otherwise. A place is kept only if it was asked for once the
// place was final: a place read before the start may still move.
func (q *Queuer) Join(ctx context.Context, s *seckill.Sale, perIP int64, req seckill.QueueJoin) (seckill.QueueJoinResult, error) {
	now := q.now()
	if pos, ok := q.KnownPlace(s.ID, req.UserID, now); ok {
		return seckill.QueueJoinResult{Position: pos}, nil
	}
	res, err := q.next.Join(ctx, s, perIP, req)
	if err == nil && res.Refused == "" && !res.RateLimited && res.Position > 0 && seckill.QueuePlaceSettled(s, now, q.margin) {
		q.known.put(s.ID, req.UserID, res.Position, s.EndAt, now)
	}
	return res, err
}

// KnownPlace returns the buyer's final place in the sale's waiting room
// when it is known at now.
func (q *Queuer) KnownPlace(saleID, userID string, now time.Time) (int64, bool) {
	pos, ok := q.known.get(saleID, userID, now)
	if ok {
		q.hits.Add(1)
	}
	return pos, ok
}

// RememberPlace keeps a place the caller read at now (a buyer polling
// it), if it is final by then.
func (q *Queuer) RememberPlace(s *seckill.Sale, userID string, pos int64, now time.Time) {
	if pos > 0 && seckill.QueuePlaceSettled(s, now, q.margin) {
		q.known.put(s.ID, userID, pos, s.EndAt, now)
	}
}

// Hits counts the joins answered from memory.
func (q *Queuer) Hits() uint64 { return q.hits.Load() }

// known holds answers by sale and buyer, each sale's until its deadline.
type known[V any] struct {
	mu       sync.RWMutex
	sales    map[string]*saleAnswers[V]
	maxSales int
	perSale  int
}

type saleAnswers[V any] struct {
	until int64 // Unix nanoseconds; written under known.mu
	mu    sync.RWMutex
	m     map[string]V
}

func newKnown[V any](cfg Config) known[V] {
	return known[V]{sales: map[string]*saleAnswers[V]{}, maxSales: cfg.MaxSales, perSale: cfg.PerSale}
}

func (k *known[V]) get(saleID, userID string, now time.Time) (v V, ok bool) {
	k.mu.RLock()
	s := k.sales[saleID]
	live := s != nil && now.UnixNano() < s.until
	k.mu.RUnlock()
	if !live {
		return v, false
	}
	s.mu.RLock()
	v, ok = s.m[userID]
	s.mu.RUnlock()
	return v, ok
}

// put keeps v for the buyer until until, the sale's deadline from now on.
// With MaxSales live sales held it keeps nothing for a new one.
func (k *known[V]) put(saleID, userID string, v V, until, now time.Time) {
	t, u := now.UnixNano(), until.UnixNano()
	if u <= t {
		return
	}
	k.mu.Lock()
	s := k.sales[saleID]
	if s == nil || s.until <= t {
		delete(k.sales, saleID)
		if len(k.sales) >= k.maxSales {
			for id, o := range k.sales {
				if o.until <= t {
					delete(k.sales, id)
				}
			}
		}
		if len(k.sales) >= k.maxSales {
			k.mu.Unlock()
			return
		}
		s = &saleAnswers[V]{m: map[string]V{}}
		k.sales[saleID] = s
	}
	s.until = u
	k.mu.Unlock()

	s.mu.Lock()
	if _, ok := s.m[userID]; !ok && len(s.m) >= k.perSale {
		for id := range s.m {
			if len(s.m) <= k.perSale*7/8 {
				break
			}
			delete(s.m, id)
		}
	}
	s.m[userID] = v
	s.mu.Unlock()
}

// len counts the sales the memory holds, lapsed ones included, and their
// answers.
func (k *known[V]) len() (sales, answers int) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, s := range k.sales {
		s.mu.RLock()
		answers += len(s.m)
		s.mu.RUnlock()
	}
	return len(k.sales), answers
}
