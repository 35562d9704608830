package main

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// TestRestartOnARedisThatLostTheSale: the fleet (here its one node)
// restarts while Redis restarted empty, in the middle of a live sale that
// sold 3 of its 5 units. No node was there to see the sale's keys go, so
// the new node's preheat finds the sale missing: it must load it held and
// heal it from the database (redis.Loader), not fresh, which would sell
// the 3 units again and turn 3 of the buyers told "claimed" into failed
// orders. A rush of 10 buyers right at the restart gets exactly the 2
// units left, each an order.
func TestRestartOnARedisThatLostTheSale(t *testing.T) {
	srv := redistest.StartServer(t)
	dir := filepath.Join(t.TempDir(), "data") // the node's SQLite and broker, kept over the restart
	node := func(c *Config) {
		c.RedisURL = "redis://" + srv.Addr
		c.DataDir = dir
		c.HealInterval = 200 * time.Millisecond
		c.ReconcileInterval = time.Hour
	}
	e1 := startEngine(t, node)
	sale := e1.liveBucketedSale(5, 1, 1)
	for _, u := range []string{"ann", "bob", "cat"} {
		e1.orderedKeyedClaim(t, sale, u, "k-"+u)
	}
	e1.stop()
	srv.Kill()
	srv.Restart(t)

	e2 := startEngine(t, node)
	var acked atomic.Int64
	claims, outcomes := e2.rushWith(sale, 0, 10, 10, "late", &acked)
	final, counts := e2.settleCounted(claims, time.Minute)
	if len(claims) != 2 || counts["ordered"] != 2 {
		t.Fatalf("after the restart: %d claims acknowledged (outcomes %v), ended %v; want the 2 units left, each an order",
			len(claims), outcomes, final)
	}
}

// stop closes the node gracefully, within 30 s, as an operator's restart
// does: the tests then start another on the same data dir or database.
func (e *engine) stop() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.m.Close(ctx); err != nil {
		e.t.Fatalf("close the node: %v", err)
	}
}
