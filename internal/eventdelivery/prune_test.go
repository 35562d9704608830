package eventdelivery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

func TestOnlyOldDeliveredEventsExpire(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	ev := func(state seckill.DeliveryState, deliveredAgo time.Duration) *seckill.EventDelivery {
		d := &seckill.EventDelivery{State: state, Event: seckill.OrderEvent{At: now.Add(-60 * 24 * time.Hour)}}
		if state == seckill.DeliveryDelivered {
			d.DeliveredAt = now.Add(-deliveredAgo)
		}
		if state == seckill.DeliveryDead {
			d.DeadAt = now.Add(-deliveredAgo)
		}
		return d
	}
	for _, c := range []struct {
		name string
		d    *seckill.EventDelivery
		keep time.Duration
		want bool
	}{
		{"delivered past the retention", ev(seckill.DeliveryDelivered, week+time.Millisecond), week, true},
		{"delivered a month ago", ev(seckill.DeliveryDelivered, 30*24*time.Hour), week, true},
		{"delivered exactly the retention ago", ev(seckill.DeliveryDelivered, week), week, false},
		{"delivered within the retention", ev(seckill.DeliveryDelivered, 24*time.Hour), week, false},
		{"pending two months", ev(seckill.DeliveryPending, 0), week, false},
		{"dead a month ago", ev(seckill.DeliveryDead, 30*24*time.Hour), week, false},
		{"kept for ever (0)", ev(seckill.DeliveryDelivered, 365*24*time.Hour), 0, false},
		{"kept for ever (negative)", ev(seckill.DeliveryDelivered, 365*24*time.Hour), -time.Hour, false},
		{"a short retention", ev(seckill.DeliveryDelivered, 2*time.Minute), time.Minute, true},
	} {
		if got := Expired(c.d, now, c.keep); got != c.want {
			t.Errorf("%s: Expired = %v, want %v", c.name, got, c.want)
		}
	}
	if before, ok := PruneBefore(now, week); !ok || !before.Equal(now.Add(-week)) {
		t.Errorf("PruneBefore(now, week) = %v, %v; want a week ago", before, ok)
	}
	if _, ok := PruneBefore(now, 0); ok {
		t.Error("PruneBefore(now, 0) prunes; want kept for ever")
	}
}

// fakePruner holds delivered events by delivery time and deletes them as
// the store does: the oldest first, at most limit a call.
type fakePruner struct {
	mu        sync.Mutex
	delivered []time.Time // oldest first
	calls     []int       // rows deleted by each call
	befores   []time.Time
	failAfter int // fail the call after this many; 0: never
}

func (f *fakePruner) PruneDelivered(_ context.Context, before time.Time, limit int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAfter > 0 && len(f.calls) == f.failAfter {
		return 0, errors.New("database gone")
	}
	n := 0
	for n < len(f.delivered) && n < limit && f.delivered[n].Before(before) {
		n++
	}
	f.delivered = f.delivered[n:]
	f.calls = append(f.calls, n)
	f.befores = append(f.befores, before)
	return n, nil
}

// TestPrunePassDeletesInBatchesUntilShort: a pass deletes a batch at a
// time until one comes back short, counts what it deleted, and a second
// pass deletes nothing more.
func TestPrunePassDeletesInBatchesUntilShort(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	f := &fakePruner{}
	for i := range 7 {
		f.delivered = append(f.delivered, now.Add(-10*24*time.Hour).Add(time.Duration(i)*time.Minute))
	}
	f.delivered = append(f.delivered, now.Add(-time.Hour)) // recent: kept
	reg := prometheus.NewRegistry()
	p, err := NewPruner(PruneConfig{Outbox: f, Keep: 7 * 24 * time.Hour, Batch: 3, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Pass(t.Context())
	if err != nil || n != 7 {
		t.Fatalf("Pass = %d, %v; want 7", n, err)
	}
	if want := []int{3, 3, 1}; !slices.Equal(f.calls, want) {
		t.Errorf("batches deleted %v, want %v", f.calls, want)
	}
	if !f.befores[0].Equal(now.Add(-7 * 24 * time.Hour)) {
		t.Errorf("pruned before %v, want a week before now", f.befores[0])
	}
	if len(f.delivered) != 1 {
		t.Errorf("%d events left, want the recent one", len(f.delivered))
	}
	if n, err := p.Pass(t.Context()); err != nil || n != 0 {
		t.Errorf("second Pass = %d, %v; want 0", n, err)
	}
	if got := counterValue(t, reg, "seckill_order_events_deleted_total"); got != 7 {
		t.Errorf("seckill_order_events_deleted_total = %v, want 7", got)
	}
}

// TestPrunePassKeepsWhatItDeletedOnError: a batch that fails ends the
// pass with an error; the batches before it stay deleted and counted.
func TestPrunePassKeepsWhatItDeletedOnError(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	f := &fakePruner{failAfter: 1}
	for range 5 {
		f.delivered = append(f.delivered, now.Add(-30*24*time.Hour))
	}
	reg := prometheus.NewRegistry()
	p, err := NewPruner(PruneConfig{Outbox: f, Keep: time.Hour, Batch: 2, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.Pass(t.Context()); err == nil || n != 2 {
		t.Errorf("Pass = %d, %v; want 2 and the error", n, err)
	}
	if got := counterValue(t, reg, "seckill_order_events_deleted_total"); got != 2 {
		t.Errorf("seckill_order_events_deleted_total = %v, want 2", got)
	}
}

func TestNewPrunerRefusesNoRetention(t *testing.T) {
	for _, keep := range []time.Duration{0, -time.Hour} {
		if _, err := NewPruner(PruneConfig{Outbox: &fakePruner{}, Keep: keep}); err == nil {
			t.Errorf("NewPruner(keep %v) = nil error; want refused (keeping for ever runs no pruner)", keep)
		}
	}
	if _, err := NewPruner(PruneConfig{Keep: time.Hour}); err == nil {
		t.Error("NewPruner without an outbox = nil error")
	}
}

// TestPrunerStopsTwice: Start and two Stops leave no goroutine behind
// (goleak in TestMain).
func TestPrunerStopsTwice(t *testing.T) {
	p, err := NewPruner(PruneConfig{Outbox: &fakePruner{}, Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(t.Context())
	for range 2 {
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
