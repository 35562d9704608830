package paytimeout

import (
	"context"
	"errors"
	"strings"
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
	s := New(store, Config{Now: newClock(t0).Now, BatchSize: 10, OnCancelled: h.OnCancelled,
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
