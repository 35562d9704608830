package conformance

import "sync"

// atOnce runs f(0) … f(n-1) on n goroutines released together, so that
// their calls race as closely as the scheduler allows, and returns when
// all have returned.
func atOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
