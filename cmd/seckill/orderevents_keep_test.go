package main

import (
	"strings"
	"testing"
	"time"

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
