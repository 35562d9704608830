package startstop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loop counts its runs and returns when its context ends.
func loop(runs *atomic.Int64) func(context.Context) {
	return func(ctx context.Context) { runs.Add(1); <-ctx.Done() }
}

func TestSecondStartDoesNothing(t *testing.T) {
	var w Worker
	var runs atomic.Int64
	if !w.Start(context.Background(), loop(&runs)) {
		t.Fatal("first Start did not start")
	}
	if w.Start(context.Background(), loop(&runs)) {
		t.Fatal("second Start started a second loop")
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d loops ran, want 1", n)
	}
	// Stopped stays stopped; Stop is safe twice. goleak checks that no
	// loop is left behind.
	if w.Start(context.Background(), loop(&runs)) {
		t.Fatal("Start after Stop started again")
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStopWithoutStart(t *testing.T) {
	var w Worker
	for range 2 {
		if err := w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := w.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if w.Started() {
		t.Fatal("Started without Start")
	}
	var runs atomic.Int64
	if w.Start(context.Background(), loop(&runs)) || runs.Load() != 0 {
		t.Fatal("Start after Stop started")
	}
	select {
	case <-w.Stopping():
	default:
		t.Fatal("Stopping not closed after Stop")
	}
}

func TestStopGivesUpWithItsContext(t *testing.T) {
	var w Worker
	release := make(chan struct{})
	w.Start(context.Background(), func(context.Context) { <-release }) // ignores cancel
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline", err)
	}
	close(release)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestDrainLetsTheLoopFinish(t *testing.T) {
	var w Worker
	var cancelled atomic.Bool
	w.Start(context.Background(), func(ctx context.Context) {
		<-w.Stopping()
		cancelled.Store(ctx.Err() != nil)
	})
	if err := w.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cancelled.Load() {
		t.Fatal("Drain cancelled a loop that finished by itself")
	}

	// A loop that does not finish is cancelled when Drain's ctx ends.
	var stuck Worker
	stuck.Start(context.Background(), func(ctx context.Context) { <-ctx.Done() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := stuck.Drain(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain = %v, want context.Canceled", err)
	}
}

func TestEveryRunsOnTicksAndWakes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{})
	calls := make(chan struct{})
	go Every(ctx, time.Hour, wake, func(context.Context) { calls <- struct{}{} })
	for range 3 {
		wake <- struct{}{}
		<-calls
	}
	cancel()

	var ticks atomic.Int64
	tctx, tcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(tctx, time.Millisecond, nil, func(context.Context) {
			if ticks.Add(1) == 3 {
				tcancel()
			}
		})
	}()
	<-done
	if n := ticks.Load(); n != 3 {
		t.Fatalf("%d calls, want 3 then none after the context ended", n)
	}
}

func TestStopNamedSaysWhose(t *testing.T) {
	var w Worker
	release := make(chan struct{})
	w.Start(context.Background(), func(context.Context) { <-release }) // ignores cancel
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.StopNamed(ctx, "archive")
	if !errors.Is(err, context.Canceled) || err.Error() != "archive: stop: context canceled" {
		t.Fatalf("StopNamed = %v, want \"archive: stop: context canceled\"", err)
	}
	close(release)
	if err := w.StopNamed(context.Background(), "archive"); err != nil {
		t.Fatalf("second StopNamed: %v", err)
	}
}

func TestStartEveryRunsAtOnce(t *testing.T) {
	var w Worker
	calls := make(chan struct{})
	w.StartEvery(context.Background(), time.Hour, func(ctx context.Context) {
		select {
		case calls <- struct{}{}:
		case <-ctx.Done():
		}
	})
	<-calls // long before the first tick
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil once d passed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with ctx ended = %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) with ctx ended = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Fatalf("Sleep(-1s) = %v, want nil", err)
	}
}

func TestClosed(t *testing.T) {
	ch := make(chan struct{})
	if Closed(ch) {
		t.Fatal("Closed of an open channel = true")
	}
	close(ch)
	if !Closed(ch) {
		t.Fatal("Closed of a closed channel = false")
	}
}
