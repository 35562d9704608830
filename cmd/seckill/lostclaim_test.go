package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// failingPublish fails every Publish while fail is set: the relay keeps
// its batch in the outbox and retries.
type failingPublish struct {
	seckill.Broker
	fail *atomic.Bool
}

func (f failingPublish) Publish(ctx context.Context, msgs []seckill.Message) error {
	if f.fail.Load() {
		return errors.New("test: publish refused")
	}
	return f.Broker.Publish(ctx, msgs)
}

// TestLostClaimFailsWithinItsBuyersWindow is issue 36 item 2: Redis in
// `none` durability loses the last claims it answered before the relay
// could publish them (it is killed and rolled back to a copy of its
// disk taken before them, as a power loss under everysec does). With the
// default --lost-claim-after (2 min), the sweeper records every one of
// them as failed (lost_in_stock_store) without any buyer polling, within
// 30 s of Redis being back; each buyer then reads failed, and
// reconciliation counts every loss.
func TestLostClaimFailsWithinItsBuyersWindow(t *testing.T) {
	primary := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	var refuse atomic.Bool
	logs := &servicetest.Buffer{}
	e := startEngine(t, func(c *Config) {
		c.RedisURL = "redis://" + primary.Addr
		c.HealInterval = 200 * time.Millisecond
		c.ReconcileInterval = time.Hour
	}, wrapRole("relay", func(b seckill.Broker) seckill.Broker { return failingPublish{b, &refuse} }),
		func(m *Main) {
			m.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
	if e.m.Config.LostClaimAfter != 2*time.Minute {
		t.Fatalf("lost-claim-after %s; the test is of the default, 2m", e.m.Config.LostClaimAfter)
	}
	sale := e.liveSale(100, 1)
	kept := &waves{e: e, sale: sale}
	kept.run(0, 5)
	servicetest.WaitFor(t, 30*time.Second, "the first claims in the database, their outbox empty", func() bool {
		l, err := e.m.orders.Ledger.SaleLedger(context.Background(), sale)
		n, oerr := e.m.stock.Outbox().OutboxLen(context.Background(), sale)
		return err == nil && oerr == nil && len(l.Orders) == 5 && n == 0
	})
	snap, err := primary.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	gone := &waves{e: e, sale: sale}
	gone.run(5, 25)
	if len(gone.claims) != 20 {
		t.Fatalf("%d claims answered while the relay was held; want 20: %v", len(gone.claims), gone.outcomes)
	}
	primary.Kill()
	if err := primary.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	refuse.Store(false)

	// Nobody polls: the sweeper finds them.
	isLost := func(id string) bool {
		f, err := e.m.orders.FailedOrder(context.Background(), id)
		return err == nil && strings.HasPrefix(f.Reason, seckill.ReasonLostInStockStore)
	}
	if !servicetest.Eventually(60*time.Second, func() bool {
		for _, c := range gone.claims {
			if !isLost(c.id) {
				return false
			}
		}
		return true
	}) {
		n := 0
		for _, c := range gone.claims {
			if isLost(c.id) {
				n++
			}
		}
		t.Fatalf("%d of %d lost claims recorded failed after 60 s; log:\n%s", n, len(gone.claims), logs.String())
	}
	took := time.Since(back)
	t.Logf("the %d lost claims were recorded failed %s after Redis was back", len(gone.claims), took.Round(time.Millisecond))
	servicetest.WantWithin(t, "lost claims recorded failed after the fault ended", took, 30*time.Second)
	final := e.settle(append(kept.claims, gone.claims...), 30*time.Second)
	for _, c := range kept.claims {
		if final[c.id] != "ordered" {
			t.Errorf("claim %s made before the copy ended %q; want ordered", c.id, final[c.id])
		}
	}
	for _, c := range gone.claims {
		if !strings.HasPrefix(final[c.id], "failed "+seckill.ReasonLostInStockStore) {
			t.Errorf("lost claim %s reads %q; want failed %s", c.id, final[c.id], seckill.ReasonLostInStockStore)
		}
	}
	rep, err := reconcile.Reconcile(context.Background(), sale, e.m.orders.Ledger, e.m.stock.Ledger(), time.Now(), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostWrites.LostClaims.Count != int64(len(gone.claims)) || rep.Oversold != 0 {
		t.Errorf("reconciliation: lost claims %+v, oversold %d; want %d lost, 0 oversold", rep.LostWrites.LostClaims, rep.Oversold, len(gone.claims))
	}
	if n := strings.Count(logs.String(), "ALERT lost claim"); n < len(gone.claims) {
		t.Errorf("%d ALERT lines for lost claims; want %d", n, len(gone.claims))
	}
}
