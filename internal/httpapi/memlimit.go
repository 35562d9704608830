package httpapi

import (
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ttlcache"
)

// memLimits counts one RateLimit per key in this node's memory, by GCRA
// (seckill.RateLimit.Admit). A key's theoretical arrival time is its
// entry's deadline in the cache, so an entry lapses exactly when its key
// has its whole burst back, and a key the bounded cache forgets gets its
// burst back early: the bound costs leniency, never a wrong refusal.
type memLimits struct {
	limit seckill.RateLimit
	tats  *ttlcache.Cache[struct{}]
	// refused is the latest instant any key stays refused: once past it,
	// refusing is one atomic load.
	refused horizon
}

// newMemLimits counts limit, or returns nil when limit is zero (off); a
// limit that is neither is an error.
func newMemLimits(limit seckill.RateLimit) (*memLimits, error) {
	if limit.IsZero() {
		return nil, nil
	}
	if err := limit.Validate(); err != nil {
		return nil, err
	}
	// Bounded as the block list is.
	return &memLimits{limit: limit, tats: ttlcache.New[struct{}](blockShards, blockShardMax)}, nil
}

// refusing reports whether key's next request would be refused at now,
// and for how long; it counts nothing.
func (m *memLimits) refusing(key string, now time.Time) (time.Duration, bool) {
	if m.refused.past(now) {
		return 0, false
	}
	_, tat, _ := m.tats.Get(key, now)
	if _, retry, ok := m.limit.Admit(tat, now); !ok {
		return retry, true
	}
	return 0, false
}

// take counts one request of key at now unless it is refused; retry is
// how long until one would fit when it is.
func (m *memLimits) take(key string, now time.Time) (retry time.Duration, ok bool) {
	_, tat, _ := m.tats.Get(key, now)
	next, retry, ok := m.limit.Admit(tat, now)
	if !ok {
		return retry, false
	}
	m.tats.Put(key, struct{}{}, next, now)
	// Its next request is refused while its tat is more than a Period
	// less an interval ahead (RateLimit.Admit).
	m.refused.extend(next.Add(m.limit.Interval() - m.limit.Period))
	return 0, true
}

// horizon is the latest of the instants it was extended to: once past it,
// nothing that lasts until one of them is live, and asking costs one
// atomic load.
type horizon struct{ ns atomic.Int64 }

func (h *horizon) extend(t time.Time) {
	for u := t.UnixNano(); ; {
		cur := h.ns.Load()
		if u <= cur || h.ns.CompareAndSwap(cur, u) {
			return
		}
	}
}

// past reports whether now is at or after every instant extended to.
func (h *horizon) past(now time.Time) bool { return now.UnixNano() >= h.ns.Load() }
