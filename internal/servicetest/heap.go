package servicetest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// PeakHeap runs f and returns the most heap it saw allocated meanwhile,
// above what was allocated before (after a GC), sampled every 5 ms: for
// tests that bound the memory a piece of work takes.
func PeakHeap(f func()) uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base.HeapAlloc && m.HeapAlloc-base.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc - base.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	f()
	return peak.Load()
}
