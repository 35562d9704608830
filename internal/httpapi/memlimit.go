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
	// until is the latest instant any key stays refused (Unix ns): once
	// past it, refusing is one atomic load.
	until atomic.Int64
}

const (
	memLimitShards   = 64
	memLimitShardMax = 1024 // 65536 keys in all
)

func newMemLimits(limit seckill.RateLimit) *memLimits {
	return &memLimits{limit: limit, tats: ttlcache.New[struct{}](memLimitShards, memLimitShardMax)}
}

// refusing reports whether key's next request would be refused at now,
// and for how long; it counts nothing.
func (m *memLimits) refusing(key string, now time.Time) (time.Duration, bool) {
	if now.UnixNano() >= m.until.Load() {
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
	// The key is refused from now on while its tat is less than an
	// interval short of a Period ahead.
	if _, _, fits := m.limit.Admit(next, now); !fits {
		end := next.Add(m.limit.Interval() - m.limit.Period).UnixNano()
		for {
			cur := m.until.Load()
			if end <= cur || m.until.CompareAndSwap(cur, end) {
				break
			}
		}
	}
	return 0, true
}
