package paytimeout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestCancelBatch: with CancelBatch the expired orders go to it one call
// per sale, each with a deadline, and its per-order errors count as
// Cancel's do: a paid order and one cancelled already are no failure.
func TestCancelBatch(t *testing.T) {
	store := newFakeStore()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		store.add(id, seckill.OrderPlaced, t0.Add(-time.Minute))
	}
	store.mu.Lock()
	store.orders["d"].SaleID, store.orders["e"].SaleID = "cake", "cake"
	store.mu.Unlock()
	var calls [][]string
	h := &hook{}
	s := New(store, Config{Now: newClock(t0).Now, BatchSize: 10, Concurrency: 1, OnCancelled: h.OnCancelled,
		CancelBatch: func(ctx context.Context, orders []*seckill.Order) []error {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("CancelBatch called without a deadline")
			}
			var ids []string
			errs := make([]error, len(orders))
			for i, o := range orders {
				ids = append(ids, o.ReservationID)
				switch o.ReservationID {
				case "b":
					errs[i] = seckill.Errorf(seckill.ESTATECONFLICT, "paid")
				case "c":
					errs[i] = ErrAlreadyCancelled
				case "e":
					errs[i] = errors.New("database is locked")
				default:
					store.set(o.ReservationID, seckill.OrderCancelled, Reason)
				}
			}
			calls = append(calls, ids)
			return errs
		}})
	n, err := s.Sweep(context.Background())
	if n != 2 || err == nil || !strings.Contains(err.Error(), "1 of 5") || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("Sweep = %d, %v; want 2 and an error naming 1 of 5", n, err)
	}
	if len(calls) != 2 || strings.Join(calls[0], ",") != "a,b,c" || strings.Join(calls[1], ",") != "d,e" {
		t.Fatalf("CancelBatch calls %v; want [a b c] then [d e]", calls)
	}
	if h.total() != 2 {
		t.Fatalf("OnCancelled total = %d, want 2", h.total())
	}
}

// TestCancelBatchShortAnswer: an answer missing some orders counts them
// as failed, never as cancelled.
func TestCancelBatchShortAnswer(t *testing.T) {
	store := newFakeStore()
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Minute))
	store.add("b", seckill.OrderPlaced, t0.Add(-time.Minute))
	s := New(store, Config{Now: newClock(t0).Now, CancelBatch: func(context.Context, []*seckill.Order) []error { return []error{nil} }})
	if n, err := s.Sweep(context.Background()); n != 1 || err == nil {
		t.Fatalf("Sweep = %d, %v; want 1 and an error", n, err)
	}
}

// TestCancelBatchesConcurrently: a backlog of 4,000 expired orders is
// listed Concurrency batches at a time (two lists of 2,000 and one that
// finds the backlog empty) and handed out in batches of BatchSize, four
// of them in flight at once: the work per batch, not the wall time, is
// what this checks.
func TestCancelBatchesConcurrently(t *testing.T) {
	store := newFakeStore()
	const n = 4000
	for i := range n {
		store.add(fmt.Sprintf("r%04d", i), seckill.OrderPlaced, t0.Add(-time.Minute))
	}
	var (
		mu              sync.Mutex
		calls, inFlight int
		most            int
		sizes           []int
	)
	together := make(chan struct{}) // closed once four calls are in flight
	s := New(store, Config{Now: newClock(t0).Now, BatchSize: 500, Concurrency: 4,
		CancelBatch: func(ctx context.Context, orders []*seckill.Order) []error {
			mu.Lock()
			calls++
			inFlight++
			most = max(most, inFlight)
			sizes = append(sizes, len(orders))
			if inFlight == 4 && most == 4 && calls == 4 {
				close(together)
			}
			first := calls <= 4
			mu.Unlock()
			if first { // the first four wait for each other: only concurrent calls get past
				select {
				case <-together:
				case <-ctx.Done():
					t.Error("the first four batches were not in flight together")
				}
			}
			for _, o := range orders {
				store.set(o.ReservationID, seckill.OrderCancelled, Reason)
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			return make([]error, len(orders))
		}, CancelTimeout: 10 * time.Second})
	got, err := s.Sweep(context.Background())
	if err != nil || got != n {
		t.Fatalf("Sweep = %d, %v; want %d", got, err, n)
	}
	store.mu.Lock()
	limits := fmt.Sprint(store.limits)
	store.mu.Unlock()
	if limits != "[2000 2000 2000]" {
		t.Errorf("ExpiredOrders limits %s; want [2000 2000 2000]: four batches a list", limits)
	}
	if calls != 8 || most != 4 || fmt.Sprint(sizes) != fmt.Sprint([]int{500, 500, 500, 500, 500, 500, 500, 500}) {
		t.Errorf("CancelBatch: %d calls of %v, at most %d at once; want 8 of 500, 4 at once", calls, sizes, most)
	}
}
