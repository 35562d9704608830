package ttlcache

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_900_000_000, 0)

func TestGetHonoursDeadline(t *testing.T) {
	c := New[string](4, 16)
	c.Put("a", "alice", t0.Add(time.Second), t0)
	if v, until, ok := c.Get("a", t0); !ok || v != "alice" || !until.Equal(t0.Add(time.Second)) {
		t.Fatalf("Get = %q, %v, %v; want alice until t0+1s", v, until, ok)
	}
	if _, _, ok := c.Get("a", t0.Add(time.Second)); ok {
		t.Fatal("an entry was returned at its deadline")
	}
	if _, _, ok := c.Get("b", t0); ok {
		t.Fatal("a key never put was found")
	}
	c.Put("a", "alice", t0.Add(time.Minute), t0)
	c.Delete("a")
	if _, _, ok := c.Get("a", t0); ok {
		t.Fatal("a deleted key was found")
	}
}

func TestBounded(t *testing.T) {
	const shards, per = 8, 64
	c := New[int](shards, per)
	for i := range 3 * shards * per {
		c.Put("k"+strconv.Itoa(i), i, t0.Add(time.Second), t0)
	}
	if n := c.Len(); n > shards*per || n < shards*per*7/8 {
		t.Fatalf("Len = %d; want at most %d, and nearly full", n, shards*per)
	}
	// The newest key is always kept, even with every shard full.
	c.Put("newest", 1, t0.Add(time.Second), t0)
	if _, _, ok := c.Get("newest", t0); !ok {
		t.Fatal("the newest key was dropped")
	}
	// Expired entries go first: a full shard of them makes room for all
	// the live ones that come next.
	c = New[int](1, per)
	for i := range per {
		c.Put("old"+strconv.Itoa(i), i, t0, t0)
	}
	for i := range per {
		c.Put("new"+strconv.Itoa(i), i, t0.Add(2*time.Second), t0.Add(time.Second))
	}
	for i := range per {
		if _, _, ok := c.Get("new"+strconv.Itoa(i), t0.Add(time.Second)); !ok {
			t.Fatalf("live entry new%d dropped while expired ones could go", i)
		}
	}
}

func TestConcurrent(t *testing.T) {
	c := New[int](4, 32)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := strconv.Itoa((g*1000 + i) % 300)
				c.Put(k, i, t0.Add(time.Second), t0)
				c.Get(k, t0)
				if i%7 == 0 {
					c.Delete(k)
				}
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n > 4*32 {
		t.Fatalf("Len = %d over the bound %d", n, 4*32)
	}
}

func BenchmarkGet(b *testing.B) {
	c := New[struct{}](64, 1024)
	c.Put("ip:198.51.100.1", struct{}{}, t0.Add(time.Hour), t0)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Get("ip:198.51.100.1", t0)
		}
	})
}

func TestClear(t *testing.T) {
	c := New[int](4, 8)
	now := time.Unix(1000, 0)
	for i := range 20 {
		c.Put(string(rune('a'+i)), i, now.Add(time.Hour), now)
	}
	if c.Len() == 0 {
		t.Fatal("nothing kept")
	}
	c.Clear()
	if n := c.Len(); n != 0 {
		t.Fatalf("Len after Clear = %d", n)
	}
	if _, _, ok := c.Get("a", now); ok {
		t.Fatal("Get after Clear found an entry")
	}
	c.Put("a", 1, now.Add(time.Hour), now)
	if v, _, ok := c.Get("a", now); !ok || v != 1 {
		t.Fatal("Put after Clear lost")
	}
}
