package preheat

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeSales struct{ sales []*seckill.Sale }

func (f *fakeSales) SalesStartingBefore(_ context.Context, t, now time.Time) ([]*seckill.Sale, error) {
	var out []*seckill.Sale
	for _, s := range f.sales {
		if !s.StartAt.After(t) && s.EndAt.After(now) {
			out = append(out, s)
		}
	}
	return out, nil
}

type fakeStock struct {
	mu     sync.Mutex
	calls  map[string]int
	loaded map[string]bool
	err    error
}

func (f *fakeStock) Preheat(_ context.Context, s *seckill.Sale) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[s.ID]++
	if f.err != nil {
		return false, f.err
	}
	created := !f.loaded[s.ID]
	f.loaded[s.ID] = true
	return created, nil
}

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 8, 20, 8, 0, 0, 0, time.UTC)
	sale := func(id string, start time.Duration) *seckill.Sale {
		return &seckill.Sale{ID: id, Stock: 200, PurchaseLimit: 1, StartAt: now.Add(start), EndAt: now.Add(start + time.Hour)}
	}
	tests := []struct {
		name    string
		sale    *seckill.Sale
		wantDue bool
	}{
		{"an hour ahead waits", sale("later", time.Hour), false},
		{"exactly the lead ahead is due", sale("edge", 10*time.Minute), true},
		{"five minutes ahead is due", sale("soon", 5*time.Minute), true},
		{"already live is due", sale("live", -30*time.Minute), true},
		{"ended is not", sale("over", -2*time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stock := &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}
			p := New(&fakeSales{sales: []*seckill.Sale{tt.sale}}, stock, Config{Now: func() time.Time { return now }})
			if got := p.Due(tt.sale); got != tt.wantDue {
				t.Fatalf("Due = %v, want %v", got, tt.wantDue)
			}
			if err := p.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := stock.loaded[tt.sale.ID]; got != tt.wantDue {
				t.Fatalf("preheated after tick = %v, want %v", got, tt.wantDue)
			}
			// A second tick does not call the store again for a loaded sale.
			if err := p.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tt.wantDue && stock.calls[tt.sale.ID] != 1 {
				t.Fatalf("store called %d times over two ticks, want 1", stock.calls[tt.sale.ID])
			}
		})
	}
}

func TestFailedPreheatIsRetried(t *testing.T) {
	now := time.Now()
	s := &seckill.Sale{ID: "s", StartAt: now, EndAt: now.Add(time.Hour)}
	stock := &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}, err: errors.New("redis down")}
	p := New(&fakeSales{sales: []*seckill.Sale{s}}, stock, Config{})
	p.SaleCreated(context.Background(), s)
	if err := p.Tick(context.Background()); err == nil {
		t.Fatal("tick with a failing store returned no error")
	}
	stock.err = nil
	if err := p.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !stock.loaded["s"] || len(p.Loaded()) != 1 {
		t.Fatalf("sale not loaded after the store recovered (loaded=%v)", stock.loaded)
	}
}

func TestStartStop(t *testing.T) {
	now := time.Now()
	s := &seckill.Sale{ID: "s", StartAt: now, EndAt: now.Add(time.Hour)}
	stock := &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}
	p := New(&fakeSales{sales: []*seckill.Sale{s}}, stock, Config{Interval: time.Millisecond})
	p.Start(context.Background())
	p.Start(context.Background()) // does nothing; goleak would see a second loop
	servicetest.Eventually(30*time.Second, func() bool { return len(p.Loaded()) > 0 })
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(p.Loaded()) != 1 {
		t.Fatal("background loop never preheated the due sale")
	}
}
