package combiner

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBatcherGroupsConcurrentRequestsAndAnswersEachInOrder: requests that
// arrive while a call is in flight go together in the next call, and each
// gets its own answer.
func TestBatcherGroupsConcurrentRequestsAndAnswersEachInOrder(t *testing.T) {
	release := make(chan struct{})
	var calls, maxBatch atomic.Int64
	b := NewBatcher(func(ctx context.Context, key string, batch []int) ([]int, error) {
		if calls.Add(1) == 1 {
			<-release // hold the first call so the rest queue up
		}
		if int64(len(batch)) > maxBatch.Load() {
			maxBatch.Store(int64(len(batch)))
		}
		out := make([]int, len(batch))
		for i, q := range batch {
			out[i] = q * 10
		}
		return out, nil
	}, Config{})
	var wg sync.WaitGroup
	first := make(chan int, 1)
	wg.Go(func() {
		r, _ := b.Do(t.Context(), "k", 1)
		first <- r
	})
	for calls.Load() == 0 { // the first call is in flight once counted
		runtime.Gosched()
	}
	errs := make(chan error, 50)
	for i := 2; i <= 51; i++ {
		wg.Go(func() {
			r, err := b.Do(t.Context(), "k", i)
			if err == nil && r != i*10 {
				t.Errorf("request %d answered %d", i, r)
			}
			errs <- err
		})
	}
	// Queued: every waiter has joined the lane before the release.
	for {
		b.mu.Lock()
		n := len(b.lanes["k"].pending)
		b.mu.Unlock()
		if n == 50 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if r := <-first; r != 10 {
		t.Fatalf("first answered %d", r)
	}
	if calls.Load() != 2 || maxBatch.Load() != 50 {
		t.Fatalf("calls = %d, largest batch %d; want 2 calls, the second of 50", calls.Load(), maxBatch.Load())
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Do(t.Context(), "k", 1); err == nil {
		t.Fatal("a stopped batcher took a request")
	}
}
