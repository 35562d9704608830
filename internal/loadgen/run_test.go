package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPacerIsExactAndDoesNotDrift(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Pacer{Start: start, Rate: 3}
	for _, tt := range []struct {
		seq  int64
		want time.Duration
	}{
		{0, 0}, {1, 333333333}, {3, time.Second}, {3_000_000, 1_000_000 * time.Second},
	} {
		if got := p.At(tt.seq).Sub(start); got != tt.want {
			t.Errorf("At(%d) = start+%v, want start+%v", tt.seq, got, tt.want)
		}
	}
	fast := Pacer{Start: start, Rate: 250_000}
	prev := fast.At(0)
	for i := int64(1); i < 1_000_000; i++ {
		at := fast.At(i)
		if at.Before(prev) {
			t.Fatalf("At(%d) = %v is before At(%d)", i, at, i-1)
		}
		prev = at
	}
	if got := prev.Sub(start); got != 3999996*time.Microsecond {
		t.Errorf("the millionth-minus-one slot at 250k/s is start+%v, want start+3.999996s", got)
	}
}

// TestFixedRateMeasuresFromIntendedTime: at a fixed rate, a server slower
// than the schedule makes later calls start late, and their latency must
// include the wait (coordinated omission): call k, due at k ms, cannot
// finish before (k+1)·20 ms on one worker. A closed loop, by contrast,
// reports only the 20 ms of service time.
func TestFixedRateMeasuresFromIntendedTime(t *testing.T) {
	const service = 20 * time.Millisecond
	var mu sync.Mutex
	calls := map[int64]Call{}
	began := map[int64]time.Time{}
	slow := func(ctx context.Context, c Call) error {
		mu.Lock()
		calls[c.Seq], began[c.Seq] = c, time.Now()
		mu.Unlock()
		time.Sleep(service)
		return nil
	}
	res, err := Run(context.Background(), Options{Workers: 1, Requests: 10, Rate: 1000}, slow)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 10 || res.Latency.Count() != 10 || len(calls) != 10 {
		t.Fatalf("%d calls, %d latencies, %d seen; want 10", res.Calls, res.Latency.Count(), len(calls))
	}
	start := calls[0].Intended
	for seq, c := range calls {
		if want := start.Add(time.Duration(seq) * time.Millisecond); !c.Intended.Equal(want) {
			t.Errorf("call %d intended at start+%v, want start+%v", seq, c.Intended.Sub(start), want.Sub(start))
		}
		if began[seq].Before(c.Intended) {
			t.Errorf("call %d began %v before it was due", seq, c.Intended.Sub(began[seq]))
		}
	}
	// The last call was due at 9 ms and finished after 10 services.
	if floor := 10*service - 9*time.Millisecond; res.Latency.Max() < floor {
		t.Errorf("max latency %v: the wait behind the slow calls was omitted (want at least %v)", res.Latency.Max(), floor)
	}
	if res.MaxLag < 9*service-9*time.Millisecond {
		t.Errorf("max lag %v, want at least %v", res.MaxLag, 9*service-9*time.Millisecond)
	}

	closed, err := Run(context.Background(), Options{Workers: 1, Requests: 10}, slow)
	if err != nil {
		t.Fatal(err)
	}
	if closed.Calls != 10 || closed.Latency.Min() < service {
		t.Fatalf("closed loop: %d calls, min latency %v", closed.Calls, closed.Latency.Min())
	}
}

func TestFixedRateDurationBoundsTheSchedule(t *testing.T) {
	// 200/s for 100 ms: exactly the 20 slots due before the end, however
	// fast or slow the calls are.
	var n atomic.Int64
	res, err := Run(context.Background(), Options{Workers: 4, Duration: 100 * time.Millisecond, Rate: 200},
		func(context.Context, Call) error { n.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 20 || n.Load() != 20 {
		t.Fatalf("%d calls (%d seen), want the 20 due in 100 ms at 200/s", res.Calls, n.Load())
	}
}

func TestMinCallsOutlastAStarvedWindow(t *testing.T) {
	// A closed-loop run whose window had passed before its goroutines ran
	// (here: it started an hour ago) makes no call, unless MinCalls asks
	// for some; then it makes exactly those.
	for _, min := range []int64{0, 3} {
		var n atomic.Int64
		res, err := Run(context.Background(), Options{Workers: 2, Duration: time.Second, MinCalls: min,
			Start: time.Now().Add(-time.Hour)}, func(context.Context, Call) error { n.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls != min || n.Load() != min {
			t.Errorf("MinCalls %d: %d calls (%d seen)", min, res.Calls, n.Load())
		}
	}
}

func TestClosedLoopCountsAndWorkers(t *testing.T) {
	var (
		inFlight, most atomic.Int64
		seen           sync.Map
	)
	res, err := Run(context.Background(), Options{Workers: 8, Requests: 1000}, func(_ context.Context, c Call) error {
		if c.Worker < 0 || c.Worker >= 8 {
			t.Errorf("worker %d out of range", c.Worker)
		}
		if _, dup := seen.LoadOrStore(c.Seq, true); dup {
			t.Errorf("seq %d twice", c.Seq)
		}
		storeMax(&most, inFlight.Add(1))
		time.Sleep(time.Microsecond)
		inFlight.Add(-1)
		if c.Seq%10 == 0 {
			return errors.New("every tenth fails")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 1000 || res.Errors != 100 || res.Latency.Count() != 1000 {
		t.Fatalf("calls %d errors %d latencies %d; want 1000, 100, 1000", res.Calls, res.Errors, res.Latency.Count())
	}
	if most.Load() > 8 {
		t.Fatalf("%d calls in flight at once with 8 workers", most.Load())
	}
	for i := range int64(1000) {
		if _, ok := seen.Load(i); !ok {
			t.Fatalf("seq %d never ran", i)
		}
	}
}

func TestRunStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	const workers = 2
	var n, late atomic.Int64
	var cancelled atomic.Bool
	res, err := Run(ctx, Options{Workers: workers, Duration: time.Hour}, func(context.Context, Call) error {
		if cancelled.Load() {
			late.Add(1)
		}
		if n.Add(1) == 50 {
			cancel()
			cancelled.Store(true)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Counted from when cancel has returned, not from the 50th call: the
	// worker that made it may be descheduled before it cancels, while the
	// other goes on calling. Once it has, a worker may still be in a call
	// it began before, but begins no other.
	if res.Calls != n.Load() || res.Calls < 50 {
		t.Errorf("Run counted %d calls; op saw %d, cancelling at the 50th", res.Calls, n.Load())
	}
	if late.Load() > workers-1 {
		t.Errorf("%d calls began after cancel returned; want at most %d (one per other worker)", late.Load(), workers-1)
	}
}

func TestRunRejectsUnboundedOptions(t *testing.T) {
	for _, o := range []Options{{Workers: 0, Requests: 1}, {Workers: 1}, {Workers: 1, Requests: 1, Rate: -1}} {
		if _, err := Run(context.Background(), o, func(context.Context, Call) error { return nil }); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
}
