package ackgate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestWaitEndsOnceItsTicketIsStored(t *testing.T) {
	g := New()
	g.Appended()
	first := g.Ticket()
	g.Appended()
	second := g.Ticket()
	mark := g.Mark() // the relay's, before it reads: both batches are in
	g.Appended()
	third := g.Ticket()
	done := make(chan error, 1)
	go func() { done <- g.Wait(context.Background(), second) }()
	g.Stored(first) // an earlier pass stored only the first
	select {
	case err := <-done:
		t.Fatalf("Wait(second) returned %v once only the first was stored", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.Stored(mark)
	if err := <-done; err != nil {
		t.Fatalf("Wait(second) after Stored(mark): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := g.Wait(ctx, third)
	if seckill.ErrorCode(err) != seckill.ETRYLATER || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(third), taken after the mark = %v; want try_later from the deadline", err)
	}
	g.Stored(first) // a mark never goes back
	if err := g.Wait(context.Background(), second); err != nil {
		t.Fatalf("Wait(second) after a lower Stored: %v", err)
	}
}

func TestHoldOnlyBatchesThatClaimed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcomes []seckill.Outcome
		wait     bool
	}{
		{"nothing claimed", []seckill.Outcome{seckill.OutcomeSoldOut, seckill.OutcomeLimitExceeded}, false},
		{"a reservation", []seckill.Outcome{seckill.OutcomeSoldOut, seckill.OutcomeReserved}, true},
		{"a replay", []seckill.Outcome{seckill.OutcomeReplayed}, true},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New()
			g.Appended()
			results := make([]seckill.ReserveResult, len(tc.outcomes))
			for i, o := range tc.outcomes {
				results[i].Outcome = o
			}
			wait := g.Hold(results)
			if (wait != nil) != tc.wait {
				t.Fatalf("Hold gave a wait: %v; want %v", wait != nil, tc.wait)
			}
			if wait == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if err := wait(ctx); err == nil {
				t.Fatal("the wait ended before the relay stored anything")
			}
			g.Stored(g.Mark())
			if err := wait(context.Background()); err != nil {
				t.Fatalf("the wait after Stored(Mark()): %v", err)
			}
		})
	}
}
