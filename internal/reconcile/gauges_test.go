package reconcile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

func TestCountsEquations(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		c                    Counts
		oversold, unrecorded int64
	}{
		{"balanced", Counts{Stock: 10, Unsold: 4, Loaded: true, RedisTotal: 10, Reserved: 6}, 0, 0},
		{"in flight", Counts{Stock: 10, Unsold: 8, Loaded: true, RedisTotal: 10, Reserved: 6}, 0, 4},
		{"failed orders hold units", Counts{Stock: 10, Unsold: 8, FailedUnits: 1, Loaded: true, RedisTotal: 10, Reserved: 3}, 0, 0},
		{"redis over its total", Counts{Stock: 10, Unsold: 0, Loaded: true, RedisTotal: 10, Reserved: 12}, 2, 2},
		{"database below zero", Counts{Stock: 10, Unsold: -1, Loaded: true, RedisTotal: 10, Reserved: 11}, 1, 0},
		{"not loaded", Counts{Stock: 10, Unsold: 7}, 0, 0},
	} {
		if got := tt.c.Oversold(); got != tt.oversold {
			t.Errorf("%s: Oversold = %d; want %d", tt.name, got, tt.oversold)
		}
		if got := tt.c.Unrecorded(); got != tt.unrecorded {
			t.Errorf("%s: Unrecorded = %d; want %d", tt.name, got, tt.unrecorded)
		}
	}
}

// TestGaugeWorkerBalanced: units in flight while orders keep landing are
// balanced; units left unrecorded while the database stops moving are
// not, once the grace has passed; oversold and alerted restores never are.
func TestGaugeWorkerBalanced(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	c := Counts{SaleID: "tea", Stock: 100, Unsold: 90, Loaded: true, RedisTotal: 100, Reserved: 20}
	g := NewGaugeWorker(GaugeConfig{
		Sales: func() []*seckill.Sale { return []*seckill.Sale{{ID: "tea"}} },
		Counts: func(context.Context, string) (Counts, error) {
			mu.Lock()
			defer mu.Unlock()
			c.CheckedAt = now
			return c, nil
		},
		Grace: time.Minute,
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	balanced := func() float64 {
		t.Helper()
		g.Refresh(context.Background())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "seckill_reconcile_balanced" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no balanced gauge")
		return 0
	}
	step := func(d time.Duration, unsold int64) {
		mu.Lock()
		now, c.Unsold = now.Add(d), unsold
		mu.Unlock()
	}
	if balanced() != 1 {
		t.Fatal("10 units in flight at the start: want balanced")
	}
	for i := range 5 { // orders keep landing: in flight, not lost
		step(time.Minute, 89-int64(i))
		if balanced() != 1 {
			t.Fatalf("step %d: orders landing, units in flight: want balanced", i)
		}
	}
	step(30*time.Second, 85)
	if balanced() != 1 {
		t.Fatal("within the grace: want balanced")
	}
	step(time.Minute, 85)
	if balanced() != 0 {
		t.Fatal("unrecorded units, the database still for over the grace: want unbalanced")
	}
	step(time.Second, 85)
	mu.Lock()
	c.Reserved = 15 // the last orders land: nothing unrecorded
	c.Unsold = 85
	mu.Unlock()
	if balanced() != 1 {
		t.Fatal("caught up: want balanced")
	}
	mu.Lock()
	c.RestoresAlerted = 1
	mu.Unlock()
	if balanced() != 0 {
		t.Fatal("an alerted restore: want unbalanced")
	}
}

// TestGaugeWorkerStartStop: a second Start, and a Start after Stop, start
// no loop (goleak, in TestMain, finds one left running); Stop is safe twice.
func TestGaugeWorkerStartStop(t *testing.T) {
	g := NewGaugeWorker(GaugeConfig{Sales: func() []*seckill.Sale { return nil }, Interval: time.Millisecond})
	g.Start(context.Background())
	g.Start(context.Background())
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Start(context.Background())
	if err := NewGaugeWorker(GaugeConfig{}).Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
