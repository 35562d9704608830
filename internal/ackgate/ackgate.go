// Package ackgate holds a claim's answer until the relay has stored it.
//
// Over the in-process stock store (miniredis) the outbox dies with the
// process, so a claim answered 202 must be in the broker's stream (files
// in the data dir) first, or a crash right after the answer loses it
// (docs/durability.md). The gate does that once per batch, not once per
// claim: the stock store counts every script that appended to an outbox
// (Appended, before it wakes the relay), a batch takes the count as its
// ticket once its call returned, the relay takes the count as its mark
// before it reads the outboxes and, once it has stored everything it
// read, says so; every batch whose ticket is at most the mark is then
// answered.
//
// The rule holds for one relay in the process of the stock store: the
// gate knows nothing of entries another relay holds.
package ackgate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/seckill-dev/seckill"
)

// ErrNotStored answers a batch whose claims were not stored in the
// broker before its buyers' budget ran out: they may or may not survive
// a crash.
var ErrNotStored = &seckill.Error{Code: seckill.ETRYLATER, Message: "The claim could not be made durable in time; retry with the same Idempotency-Key."}

// Gate is shared by the reserve path (Ticket, Wait) and the relay (Mark,
// Stored). The zero value is not ready; use New.
type Gate struct {
	tickets atomic.Uint64

	mu     sync.Mutex
	stored uint64
	moved  chan struct{} // closed, and replaced, whenever stored moves
}

// New returns a gate with nothing waiting.
func New() *Gate { return &Gate{moved: make(chan struct{})} }

// Appended is called by the stock store after every script that appended
// to an outbox, before it wakes the relay (redis.WithOnOutboxAppend).
func (g *Gate) Appended() { g.tickets.Add(1) }

// Ticket is taken by a reserve batch once its call returned: every append
// counted by then, its own included, is stored once the relay stores a
// mark at least as high.
func (g *Gate) Ticket() uint64 { return g.tickets.Load() }

// Mark is taken by the relay before it reads the outboxes: every batch
// with a ticket up to it has its entry in an outbox by then.
func (g *Gate) Mark() uint64 { return g.tickets.Load() }

// Stored tells the gate that the relay has stored (published, confirmed)
// every outbox entry written before it took mark.
func (g *Gate) Stored(mark uint64) {
	g.mu.Lock()
	if mark > g.stored {
		g.stored = mark
		close(g.moved)
		g.moved = make(chan struct{})
	}
	g.mu.Unlock()
}

// Wait returns nil once ticket is stored, or ErrNotStored (wrapping
// ctx's error) when ctx ends first.
func (g *Gate) Wait(ctx context.Context, ticket uint64) error {
	for {
		g.mu.Lock()
		stored, moved := g.stored, g.moved
		g.mu.Unlock()
		if stored >= ticket {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return errors.Join(ErrNotStored, ctx.Err())
		}
	}
}

// Hold is the combiner's hook (combiner.Config.Hold): a batch that
// claimed something waits for its ticket; one that claimed nothing, for
// nothing.
func (g *Gate) Hold(results []seckill.ReserveResult) func(context.Context) error {
	for _, r := range results {
		if r.Outcome.Claimed() {
			t := g.Ticket()
			return func(ctx context.Context) error { return g.Wait(ctx, t) }
		}
	}
	return nil
}
