package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestOrderEventsKeepFlag: delivered events are kept a week unless
// --order-events-keep ($SECKILL_ORDER_EVENTS_KEEP) says otherwise, 0
// keeping them for ever; a negative retention is refused before anything
// opens.
func TestOrderEventsKeepFlag(t *testing.T) {
	if got := DefaultConfig().Events.Keep; got != 7*24*time.Hour {
		t.Errorf("default retention %v, want a week", got)
	}
	parse := func(args ...string) time.Duration { return parseServe(t, args...).Events.Keep }
	if got := parse("--order-events-keep", "36h"); got != 36*time.Hour {
		t.Errorf("--order-events-keep 36h: %v", got)
	}
	t.Setenv("SECKILL_ORDER_EVENTS_KEEP", "0")
	if got := parse(); got != 0 {
		t.Errorf("SECKILL_ORDER_EVENTS_KEEP=0: %v, want 0 (for ever)", got)
	}

	c := DefaultConfig()
	c.Events.WebhookURL, c.Events.WebhookSecret, c.Events.Keep = "http://127.0.0.1:1/events", shopSecret, -time.Hour
	if err := c.Events.check(); err == nil || !strings.Contains(err.Error(), "keep") {
		t.Errorf("--order-events-keep -1h: check() = %v, want an error naming it", err)
	}
	c.Events.Keep = 0
	if err := c.Events.check(); err != nil {
		t.Errorf("--order-events-keep 0: check() = %v", err)
	}
}

// TestOrderEventsPrunerRunsWithARetention: a node delivering events runs
// the pruner (its counter is on /metrics) unless events are kept for ever.
func TestOrderEventsPrunerRunsWithARetention(t *testing.T) {
	s := startShop(t)
	redisURL, prefix := sharedRedis(t)
	const deleted = "seckill_order_events_deleted_total"
	on := startEngine(t, withShop(t, s, sqltest.SQLite(t), redisURL, prefix))
	if got := scrape(on.client, on.base, deleted); got != 0 {
		t.Errorf("with a retention: %s = %v, want 0 (registered, nothing deleted yet)", deleted, got)
	}
	off := startEngine(t, func(c *Config) {
		withShop(t, s, sqltest.SQLite(t), redisURL, prefix)(c)
		c.Events.Keep = 0
	})
	if got := scrape(off.client, off.base, deleted); got != -1 {
		t.Errorf("kept for ever: %s = %v, want absent (no pruner)", deleted, got)
	}
}

// TestOrderEventsPrunedOnceDelivered: a running node deletes delivered
// events once they are older than the retention, each once: after a rush
// whose every event reached the shop, the deleted counter reaches exactly
// the number of events the ledger calls for, and no pending one remains.
func TestOrderEventsPrunedOnceDelivered(t *testing.T) {
	s := startShop(t)
	redisURL, prefix := sharedRedis(t)
	e := startEngine(t, func(c *Config) {
		withShop(t, s, sqltest.SQLite(t), redisURL, prefix)(c)
		c.Events.Keep = time.Millisecond
	}, func(m *Main) { m.pruneEvery = 20 * time.Millisecond })
	sale := e.liveSale(100, 1)
	claims := buyAndCancel(t, e.client, e.base, e.m.Config.JWTSecret, sale, 150, 3, "prune")
	ledger := func() (*seckill.SaleLedger, error) { return e.m.orders.Ledger.SaleLedger(context.Background(), sale) }
	f := s.awaitAllDelivered(ledger, claims, 2*time.Minute)
	f.check(t, "before pruning")
	const deleted = "seckill_order_events_deleted_total"
	servicetest.WaitFor(t, time.Minute, "every delivered event deleted", func() bool {
		return scrape(e.client, e.base, deleted) >= float64(f.Expected)
	})
	if got := scrape(e.client, e.base, deleted); got != float64(f.Expected) {
		t.Errorf("%s = %v, want %d: each delivered event deleted once", deleted, got, f.Expected)
	}
	if pending := scrape(e.client, e.base, "seckill_order_events_pending"); pending != 0 {
		t.Errorf("seckill_order_events_pending = %v, want 0", pending)
	}
}
