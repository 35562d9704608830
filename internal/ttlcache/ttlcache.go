// Package ttlcache is seckill's one expiring cache: each entry is kept
// until a deadline of its own, a lookup is a map read under a shard's read
// lock (cheap enough for the request path), and the size is bounded. A
// full shard drops its expired entries and, if live ones still fill more
// than 7/8 of it, arbitrary ones (map order) down to 7/8, so the sweep
// does not come back for another eighth of the shard's puts: a flood of
// keys costs a bounded amount per put and never grows the memory.
// Forgetting a live entry only costs its owner the work the entry saved.
//
// The clock is the caller's: every call takes now.
package ttlcache

import (
	"hash/maphash"
	"sync"
	"time"
)

// Cache maps string keys to values of type V, each until its own deadline.
// Its methods are safe for concurrent use.
type Cache[V any] struct {
	seed     maphash.Seed
	shards   []shard[V]
	shardMax int
}

type shard[V any] struct {
	mu sync.RWMutex
	m  map[string]entry[V]
	_  [40]byte // keep shards on their own cache lines
}

type entry[V any] struct {
	v     V
	until int64 // Unix nanoseconds
}

// New returns a Cache of shards shards holding at most perShard entries
// each.
func New[V any](shards, perShard int) *Cache[V] {
	c := &Cache[V]{seed: maphash.MakeSeed(), shards: make([]shard[V], max(shards, 1)), shardMax: max(perShard, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]entry[V])
	}
	return c
}

// shardTail is how much of a key's end picks its shard. The map hashes
// the whole key again: hashing a few hundred bytes of buyer token twice
// per lookup showed in the reservation route's profile, and a key's end
// varies as much as any part of it (a token's signature, an IP address, a
// user id). Keys alike in their last shardTail bytes share a shard, which
// costs only balance: each shard is bounded on its own.
const shardTail = 16

func (c *Cache[V]) shard(key string) *shard[V] {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.String(c.seed, key[max(len(key)-shardTail, 0):])%uint64(len(c.shards))]
}

// Get returns key's value and deadline if it has one that is after now.
func (c *Cache[V]) Get(key string, now time.Time) (v V, until time.Time, ok bool) {
	sh := c.shard(key)
	sh.mu.RLock()
	e, ok := sh.m[key]
	sh.mu.RUnlock()
	if !ok || e.until <= now.UnixNano() {
		return v, time.Time{}, false
	}
	return e.v, time.Unix(0, e.until), true
}

// Put keeps v for key until until, making room in a full shard first.
func (c *Cache[V]) Put(key string, v V, until, now time.Time) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.shardMax {
		sh.makeRoomLocked(now.UnixNano(), c.shardMax)
	}
	sh.m[key] = entry[V]{v: v, until: until.UnixNano()}
}

// Delete forgets key.
func (c *Cache[V]) Delete(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// Len is the number of entries held, expired ones included.
func (c *Cache[V]) Len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

// makeRoomLocked drops the expired entries of a full shard and, if live
// ones still fill more than 7/8 of it, arbitrary ones down to 7/8.
func (sh *shard[V]) makeRoomLocked(now int64, limit int) {
	for k, e := range sh.m {
		if e.until <= now {
			delete(sh.m, k)
		}
	}
	for k := range sh.m {
		if len(sh.m) <= limit*7/8 {
			break
		}
		delete(sh.m, k)
	}
}

// Clear forgets every entry.
func (c *Cache[V]) Clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.mu.Unlock()
	}
}
