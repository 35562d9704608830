package relay

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// emptyOutbox is a registry of sales whose outboxes are always empty, and
// which itself allocates nothing per call.
type emptyOutbox struct{ sales []string }

func (o *emptyOutbox) OutboxSales(context.Context) ([]string, error)      { return o.sales, nil }
func (o *emptyOutbox) ForgetOutbox(context.Context, string) (bool, error) { return false, nil }
func (o *emptyOutbox) OutboxLen(context.Context, string) (int64, error)   { return 0, nil }
func (o *emptyOutbox) ReadOutbox(context.Context, string, string, string, int, time.Duration) ([]seckill.OutboxEntry, error) {
	return nil, nil
}
func (o *emptyOutbox) ReadPendingOutbox(context.Context, string, string, string, int) ([]seckill.OutboxEntry, error) {
	return nil, nil
}
func (o *emptyOutbox) ClaimStaleOutbox(context.Context, string, string, string, time.Duration, int) ([]seckill.OutboxEntry, error) {
	return nil, nil
}
func (o *emptyOutbox) AckOutbox(context.Context, string, string, []string) error { return nil }

// TestEmptyPassAllocatesNothing: polling empty outboxes, what an idle
// relay does all day, allocates nothing in the relay itself (the store's
// client allocates what it must for its own calls).
func TestEmptyPassAllocatesNothing(t *testing.T) {
	out := &emptyOutbox{sales: []string{"sale1", "sale2", "sale3"}}
	cfg := testConfig(t, "r1")
	cfg.ClaimMinIdle = time.Hour // the claim and forget calls come due rarely
	r := New(out, &fakeBroker{}, cfg)
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	r.pass(ctx, log, false) // first visit: per-sale state is created once
	allocs := testing.AllocsPerRun(100, func() {
		if found, _ := r.pass(ctx, log, true); found != 0 {
			t.Fatalf("pass found %d entries in empty outboxes", found)
		}
	})
	if allocs != 0 {
		t.Errorf("a pass over empty outboxes allocated %.1f times; want 0", allocs)
	}
}

// TestBatchScratchDeduplicates: entries read twice in one pass (own
// pending ones also returned by a claim) are published once, and the
// reused batch does not carry entries into the next pass.
func TestBatchScratchDeduplicates(t *testing.T) {
	sale := "sale1"
	ev := func(id string) seckill.OutboxEntry {
		return seckill.OutboxEntry{StreamID: id, Event: seckill.ReservationEvent{
			ReservationID: seckill.NewReservationID(sale, time.Now()), SaleID: sale, UserID: "u1", Qty: 1, ReservedAt: time.Now()}}
	}
	a, b := ev("1-0"), ev("2-0")
	out := &dupOutbox{emptyOutbox: emptyOutbox{sales: []string{sale}}, pending: []seckill.OutboxEntry{a, b}, claim: []seckill.OutboxEntry{b}}
	broker := &fakeBroker{}
	r := New(out, broker, testConfig(t, "r1"))
	log := slog.New(slog.DiscardHandler)
	if found, _ := r.pass(context.Background(), log, false); found != 2 {
		t.Fatalf("first pass published %d entries; want 2 (one read twice)", found)
	}
	out.pending, out.claim = nil, nil
	if found, _ := r.pass(context.Background(), log, false); found != 0 {
		t.Fatalf("second pass published %d entries; want 0", found)
	}
	if n := broker.publishedCount(); n != 2 {
		t.Errorf("broker got %d messages; want 2", n)
	}
}

type dupOutbox struct {
	emptyOutbox
	pending, claim []seckill.OutboxEntry
}

func (o *dupOutbox) ReadPendingOutbox(context.Context, string, string, string, int) ([]seckill.OutboxEntry, error) {
	return o.pending, nil
}
func (o *dupOutbox) ClaimStaleOutbox(context.Context, string, string, string, time.Duration, int) ([]seckill.OutboxEntry, error) {
	return o.claim, nil
}
