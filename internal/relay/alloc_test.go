package relay

import (
	"context"
	"fmt"
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
		if found, _, _, _ := r.pass(ctx, log, true); found != 0 {
			t.Fatalf("pass found %d entries in empty outboxes", found)
		}
	})
	if allocs != 0 {
		t.Errorf("a pass over empty outboxes allocated %.1f times; want 0", allocs)
	}
}

// TestBatchScratchDeduplicates: entries read twice in one pass (own
// pending ones also returned by a claim) are published once, with every
// reservation of each, and acked once; the reused batch does not carry
// entries into the next pass.
func TestBatchScratchDeduplicates(t *testing.T) {
	sale := "sale1"
	ev := func(id string, seq int) seckill.OutboxEntry {
		return seckill.OutboxEntry{StreamID: id, Seq: seq, Event: seckill.ReservationEvent{
			ReservationID: seckill.NewReservationID(sale, time.Now()), SaleID: sale, UserID: "u1", Qty: 1, ReservedAt: time.Now()}}
	}
	a := []seckill.OutboxEntry{ev("1-0", 0)}
	b := []seckill.OutboxEntry{ev("2-0", 0), ev("2-0", 1), ev("2-0", 2)}
	c := []seckill.OutboxEntry{ev("3-0", 0), ev("3-0", 1)} // only claimed
	out := &dupOutbox{emptyOutbox: emptyOutbox{sales: []string{sale}}, pending: append(a, b...), claim: append(b, c...)}
	broker := &fakeBroker{}
	r := New(out, broker, testConfig(t, "r1"))
	log := slog.New(slog.DiscardHandler)
	if found, _, _, _ := r.pass(context.Background(), log, false); found != 6 {
		t.Fatalf("first pass published %d reservations; want 6 (an entry of 3 read twice)", found)
	}
	out.pending, out.claim = nil, nil
	if found, _, _, _ := r.pass(context.Background(), log, false); found != 0 {
		t.Fatalf("second pass published %d reservations; want 0", found)
	}
	if n := broker.publishedCount(); n != 6 {
		t.Errorf("broker got %d messages; want 6", n)
	}
	if fmt.Sprint(out.acked) != "[[1-0 2-0 3-0]]" {
		t.Errorf("acks %v; want one, of each entry once", out.acked)
	}
}

type dupOutbox struct {
	emptyOutbox
	pending, claim []seckill.OutboxEntry
	acked          [][]string
}

func (o *dupOutbox) AckOutbox(_ context.Context, _, _ string, ids []string) error {
	o.acked = append(o.acked, ids)
	return nil
}

func (o *dupOutbox) ReadPendingOutbox(context.Context, string, string, string, int) ([]seckill.OutboxEntry, error) {
	return o.pending, nil
}
func (o *dupOutbox) ClaimStaleOutbox(context.Context, string, string, string, time.Duration, int) ([]seckill.OutboxEntry, error) {
	return o.claim, nil
}
