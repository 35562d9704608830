package preheat

import (
	"context"
	"errors"
	"fmt"
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
			c := *s
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeSales) Sale(_ context.Context, id string) (*seckill.Sale, error) {
	for _, s := range f.sales {
		if s.ID == id {
			c := *s
			return &c, nil
		}
	}
	return nil, fmt.Errorf("sale %s: %w", id, seckill.ErrNotFound)
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
	queue := func(id string, start time.Duration) *seckill.Sale {
		s := sale(id, start)
		s.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}
		return s
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
		{"twelve minutes ahead waits", sale("first-come-12", 12*time.Minute), false},
		{"a queue sale twelve minutes ahead is due: its room is open", queue("queue-12", 12*time.Minute), true},
		{"a queue sale before its room opens waits", queue("queue-16", 16*time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stock := &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}
			p := New(&fakeSales{sales: []*seckill.Sale{tt.sale}}, stock, Config{Now: func() time.Time { return now }, QueueOpensBefore: 15 * time.Minute})
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

// TestChangesReachTheLoadedList: an operator's change made on another
// node reaches this node's loaded list on its next tick, from the
// database's row; one made here (SaleChanged) at once.
func TestChangesReachTheLoadedList(t *testing.T) {
	now := time.Date(2026, 8, 20, 8, 0, 0, 0, time.UTC)
	newSale := func(id string, start time.Duration) *seckill.Sale {
		return &seckill.Sale{ID: id, Version: 1, Stock: 200, PurchaseLimit: 1, StartAt: now.Add(start), EndAt: now.Add(start + time.Hour)}
	}
	tests := []struct {
		name   string
		start  time.Duration
		change func(s *seckill.Sale) // the database's row after the change
		want   *seckill.Sale         // the loaded row after a tick; nil: not loaded
	}{
		{"live, ended early", -30 * time.Minute, func(s *seckill.Sale) { s.EndAt = now.Add(-time.Second) }, nil},
		{"live, stock added", -30 * time.Minute, func(s *seckill.Sale) { s.Stock += 50 },
			&seckill.Sale{Stock: 250, EndAt: now.Add(30 * time.Minute)}},
		{"due, edited", 5 * time.Minute, func(s *seckill.Sale) { s.Stock, s.EndAt = 90, now.Add(20*time.Minute) },
			&seckill.Sale{Stock: 90, EndAt: now.Add(20 * time.Minute)}},
		{"due, start moved past the lead", 5 * time.Minute, func(s *seckill.Sale) { s.StartAt, s.EndAt = now.Add(time.Hour), now.Add(3*time.Hour) },
			&seckill.Sale{Stock: 200, EndAt: now.Add(3 * time.Hour)}},
		{"preheated ahead, ended early", 2 * time.Hour, func(s *seckill.Sale) { s.StartAt, s.EndAt = now.Add(-time.Second), now.Add(-time.Second) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			row := newSale("s", tt.start)
			db := &fakeSales{sales: []*seckill.Sale{row}}
			p := New(db, &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}, Config{Now: func() time.Time { return now }})
			// Loaded by a tick, or by the operator when not due.
			if p.Due(row) {
				if err := p.Tick(ctx); err != nil {
					t.Fatal(err)
				}
			} else if _, err := p.Preheat(ctx, row); err != nil {
				t.Fatal(err)
			}
			if got := p.Loaded(); len(got) != 1 {
				t.Fatalf("loaded before the change: %d sales, want 1", len(got))
			}
			changed := *row
			tt.change(&changed)
			changed.Version++
			db.sales = []*seckill.Sale{&changed}
			if err := p.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			got := p.Loaded()
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("loaded after the change: %+v, want none", got[0])
				}
				return
			}
			if len(got) != 1 || got[0].Stock != tt.want.Stock || !got[0].EndAt.Equal(tt.want.EndAt) {
				t.Fatalf("loaded after the change: %+v, want stock %d, end %v", got, tt.want.Stock, tt.want.EndAt)
			}
		})
	}
	t.Run("gone from the database", func(t *testing.T) {
		db := &fakeSales{sales: []*seckill.Sale{newSale("s", 0)}}
		p := New(db, &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}, Config{Now: func() time.Time { return now }})
		if err := p.Tick(context.Background()); err != nil || len(p.Loaded()) != 1 {
			t.Fatalf("first tick: %v, %d loaded", err, len(p.Loaded()))
		}
		db.sales = nil
		if err := p.Tick(context.Background()); err != nil || len(p.Loaded()) != 0 {
			t.Fatalf("tick after the row went: %v, %d loaded, want none", err, len(p.Loaded()))
		}
	})
	t.Run("changed on this node", func(t *testing.T) {
		ctx := context.Background()
		row := newSale("s", -30*time.Minute)
		db := &fakeSales{sales: []*seckill.Sale{row}}
		p := New(db, &fakeStock{calls: map[string]int{}, loaded: map[string]bool{}}, Config{Now: func() time.Time { return now }})
		if err := p.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		raised := *row
		raised.Stock, raised.Version = 300, 3
		p.SaleChanged(ctx, &raised)
		if got := p.Loaded(); len(got) != 1 || got[0].Stock != 300 {
			t.Fatalf("loaded after SaleChanged: %+v, want stock 300", got)
		}
		// A tick that read the row before the change keeps the newer one.
		if err := p.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.Loaded(); len(got) != 1 || got[0].Stock != 300 {
			t.Fatalf("loaded after a tick with an older row: %+v, want stock 300 kept", got)
		}
		ended := raised
		ended.EndAt, ended.Version = now, 4
		p.SaleChanged(ctx, &ended)
		if got := p.Loaded(); len(got) != 0 {
			t.Fatalf("loaded after SaleChanged ended it: %+v, want none", got[0])
		}
	})
}
