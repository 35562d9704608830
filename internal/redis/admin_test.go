package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestSaleAdmin checks the live copy's side of an operator's changes on
// every backend.
func TestSaleAdmin(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		runParallel(t, newStore, []storeTest{
			{"Edit", testEditLive},
			{"End", testEndLive},
			{"Raise", testRaiseLive},
			{"Buckets", testAdminBuckets},
		})
	})
}

func reserveOne(t *testing.T, s *Store, sale *seckill.Sale, user string) seckill.Outcome {
	t.Helper()
	res, err := s.StockStore().Reserve(context.Background(), sale.ID, []seckill.ReserveRequest{request(sale.ID, user, 1, "")})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res[0].Outcome
}

func testEditLive(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(10, 1)
	sale.StartAt, sale.EndAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	// Not loaded: the edit loads it, so a preheat that read the old row
	// cannot load the old values afterwards.
	sale.Stock = 20
	if err := s.Admin().EditSale(ctx, sale); err != nil {
		t.Fatalf("EditSale of a sale not loaded: %v", err)
	}
	old := *sale
	old.Stock = 10
	if created, err := s.StockStore().Preheat(ctx, &old); err != nil || created {
		t.Errorf("preheat after the edit: created %v, %v; want a no-op", created, err)
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Total != 20 {
		t.Errorf("stock after edit and stale preheat = %+v, %v; want total 20", lvl, err)
	}
	// Loaded, not started: edited again, and now open.
	sale.Stock, sale.StartAt = 30, time.Now().Add(-time.Second)
	if err := s.Admin().EditSale(ctx, sale); err != nil {
		t.Fatalf("EditSale of a loaded sale before its start: %v", err)
	}
	if got := reserveOne(t, s, sale, "u1"); got != seckill.OutcomeReserved {
		t.Fatalf("reserve after the edit opened the sale: %s", got)
	}
	// Started (and with a reservation): refused, unchanged.
	sale.Stock, sale.StartAt = 99, time.Now().Add(time.Hour)
	if err := s.Admin().EditSale(ctx, sale); !errors.Is(err, ErrSaleStarted) {
		t.Errorf("EditSale of a started sale: %v, want ErrSaleStarted", err)
	}
	if lvl, _ := s.StockStore().Stock(ctx, sale.ID); lvl.Total != 30 || lvl.Reserved != 1 {
		t.Errorf("stock after a refused edit = %+v, want total 30 reserved 1", lvl)
	}
}

func testEndLive(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 5))
	if got := reserveOne(t, s, sale, "u1"); got != seckill.OutcomeReserved {
		t.Fatalf("reserve before the end: %s", got)
	}
	if ended, err := s.Admin().EndSale(ctx, sale.ID); err != nil || !ended {
		t.Fatalf("EndSale: ended %v, %v", ended, err)
	}
	if got := reserveOne(t, s, sale, "u2"); got != seckill.OutcomeEnded {
		t.Errorf("reserve after the end: %s, want ended", got)
	}
	if ended, err := s.Admin().EndSale(ctx, sale.ID); err != nil || ended {
		t.Errorf("second EndSale: ended %v, %v; want false", ended, err)
	}
	// A sale that never opened answers "ended" too.
	sched := liveSale(10, 5)
	sched.StartAt, sched.EndAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	mustPreheat(t, s, sched)
	if ended, err := s.Admin().EndSale(ctx, sched.ID); err != nil || !ended {
		t.Fatalf("EndSale of a scheduled sale: %v, %v", ended, err)
	}
	if got := reserveOne(t, s, sched, "u3"); got != seckill.OutcomeEnded {
		t.Errorf("reserve on a scheduled sale ended early: %s, want ended", got)
	}
	// Not loaded: nothing to do.
	if ended, err := s.Admin().EndSale(ctx, liveSale(1, 1).ID); err != nil || ended {
		t.Errorf("EndSale of a sale not loaded: %v, %v", ended, err)
	}
}

func testRaiseLive(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(1, 5))
	if got := reserveOne(t, s, sale, "u1"); got != seckill.OutcomeReserved {
		t.Fatalf("first reserve: %s", got)
	}
	if got := reserveOne(t, s, sale, "u2"); got != seckill.OutcomeSoldOut {
		t.Fatalf("second reserve: %s, want sold out", got)
	}
	if raised, err := s.Admin().RaiseStock(ctx, sale.ID, 3, 2); err != nil || !raised {
		t.Fatalf("RaiseStock: %v, %v", raised, err)
	}
	if got := reserveOne(t, s, sale, "u2"); got != seckill.OutcomeReserved {
		t.Errorf("reserve after the raise: %s", got)
	}
	// Never lowered: a late or repeated call changes nothing.
	for _, total := range []int64{3, 2} {
		if raised, err := s.Admin().RaiseStock(ctx, sale.ID, total, 0); err != nil || raised {
			t.Errorf("RaiseStock(%d) after 3: %v, %v; want unchanged", total, raised, err)
		}
	}
	if lvl, _ := s.StockStore().Stock(ctx, sale.ID); lvl.Total != 3 || lvl.Reserved != 2 {
		t.Errorf("stock = %+v, want total 3 reserved 2", lvl)
	}
	if raised, err := s.Admin().RaiseStock(ctx, liveSale(1, 1).ID, 5, 4); err != nil || raised {
		t.Errorf("RaiseStock of a sale not loaded: %v, %v", raised, err)
	}
}

// testAdminBuckets: a sale of several stock buckets is edited, raised and
// ended in every bucket.
func testAdminBuckets(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(8, 5)
	sale.Buckets = 4
	sale.StartAt, sale.EndAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	if err := s.Admin().EditSale(ctx, sale); err != nil {
		t.Fatalf("EditSale of a bucketed sale not loaded: %v", err)
	}
	if bs, err := s.buckets(ctx, sale.ID); err != nil || bs.k() != 4 {
		t.Fatalf("layout after the edit: %v, %v; want 4 buckets", bs, err)
	}
	sale.Stock, sale.StartAt = 12, time.Now().Add(-time.Second)
	if err := s.Admin().EditSale(ctx, sale); err != nil {
		t.Fatalf("second EditSale: %v", err)
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Total != 12 {
		t.Errorf("stock after the edits = %+v, %v; want total 12", lvl, err)
	}
	for range 2 { // the same addition twice: applied once
		if _, err := s.Admin().RaiseStock(ctx, sale.ID, 15, 3); err != nil {
			t.Fatalf("RaiseStock: %v", err)
		}
	}
	if lvl, _ := s.StockStore().Stock(ctx, sale.ID); lvl.Total != 15 {
		t.Errorf("stock after adding 3 (twice the same call) = %+v, want total 15", lvl)
	}
	if got := reserveOne(t, s, sale, "u-before"); got != seckill.OutcomeReserved {
		t.Fatalf("reserve before the end: %s", got)
	}
	if ended, err := s.Admin().EndSale(ctx, sale.ID); err != nil || !ended {
		t.Fatalf("EndSale: %v, %v", ended, err)
	}
	// Buyers of every home bucket hear "ended".
	for i := range 16 {
		if got := reserveOne(t, s, sale, "u"+strconv.Itoa(i)); got != seckill.OutcomeEnded {
			t.Errorf("buyer u%d after the end: %s, want ended", i, got)
		}
	}
}
