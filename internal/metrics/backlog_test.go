package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

type fakeBacklog struct {
	mu    sync.Mutex
	n     int64
	err   error
	calls int
}

func (f *fakeBacklog) Backlog(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.n, f.err
}

// TestBacklogSampler: the gauge shows the last sample while it is fresh,
// and disappears rather than lie once the broker stops answering.
func TestBacklogSampler(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Unix(1_700_000_000, 0)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b := &fakeBacklog{n: 7}
	s := NewBacklog(b, time.Hour, slog.New(slog.DiscardHandler), clock)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)

	if got, ok := gauge(t, reg); ok {
		t.Fatalf("before any sample: gauge %v; want none", got)
	}
	s.sample(context.Background())
	if got, ok := gauge(t, reg); !ok || got != 7 {
		t.Errorf("gauge %v (exported %v), want 7", got, ok)
	}
	if v, ok := s.Last(); !ok || v != 7 {
		t.Errorf("last() = %d, %v; want 7, true", v, ok)
	}

	b.mu.Lock()
	b.err = errors.New("broker down")
	b.mu.Unlock()
	s.sample(context.Background())
	if v, ok := s.Last(); !ok || v != 7 {
		t.Errorf("one failed sample: last() = %d, %v; want the previous 7 while fresh", v, ok)
	}
	advance(3*time.Hour + time.Second)
	if got, ok := gauge(t, reg); ok {
		t.Errorf("after three intervals without an answer: gauge %v; want none", got)
	}

	// Start samples at once; Stop twice is fine.
	s2 := NewBacklog(&fakeBacklog{n: 2}, time.Hour, slog.New(slog.DiscardHandler), time.Now)
	s2.Start(context.Background())
	servicetest.WaitFor(t, 10*time.Second, "the first sample", func() bool { _, ok := s2.Last(); return ok })
	for range 2 {
		if err := s2.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// gauge is the value of seckill_broker_backlog_messages in reg, if any.
func gauge(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_broker_backlog_messages" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}
