package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// lotteryEntrants is TestLotteryThreeNodesKillDuringDraw's crowd: 2,000
// in CI; the 10,000 with SECKILL_TEST_LOTTERY_FULL=1.
func lotteryEntrants() (n int, window time.Duration) {
	if os.Getenv("SECKILL_TEST_LOTTERY_FULL") == "1" {
		return 10_000, 30 * time.Second
	}
	return 2_000, 10 * time.Second
}

// TestLotteryThreeNodesKillDuringDraw is issue 29's proof: three `seckill
// serve` processes on one Redis, one NATS JetStream and one PostgreSQL;
// 2,000 entrants (10,000 with SECKILL_TEST_LOTTERY_FULL=1) enter a
// lottery for 100 units, round robin; the node that runs the draw is
// SIGKILLed once it has reserved some winners and before it finished.
// Another node finishes the draw: exactly 100 winners, each with one
// order (the database's unsold stock is 0, and nothing failed), every
// entrant a result, and the revealed seed verifies.
func TestLotteryThreeNodesKillDuringDraw(t *testing.T) {
	const (
		nodes = 3
		units = 100
	)
	entrants, window := lotteryEntrants()
	bin := seckillBinary(t)
	redisURL, prefix := servicetest.Redis.URL(t), servicetest.UniqueName("sk")
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	natsURL := startNATS(t)
	dbURL := sqltest.Postgres(t)
	c := &cluster{t: t, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}}}
	queue := servicetest.UniqueName("lot_")
	for i := range nodes {
		name := fmt.Sprintf("node%d", i)
		c.nodes = append(c.nodes, newNode(t, bin, name, []string{
			"--http-addr", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), name),
			"--redis-url", redisURL, "--redis-key-prefix", prefix,
			"--broker-url", natsURL, "--broker-queue", queue, "--database-url", dbURL,
			"--jwt-secret", mnSecret, "--admin-token", mnAdmin,
			"--rate-limit-ip", "off", "--rate-limit-user", "off", "--max-inflight", "-1",
			// The draw reserves 10 winners a call, 200 ms apart: it
			// takes about 2 s, time to kill it in the middle.
			"--draw-interval", "100ms", "--draw-lease", "3s", "--draw-batch", "10", "--draw-pace", "200ms",
			"--log-level", "info",
		}))
	}
	if err := c.nodes[0].start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i, n := range c.nodes[1:] {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	now := time.Now()
	sale, closeAt := servicetest.UniqueName("lot"), now.Add(window)
	if a := c.do(0, "POST", "/admin/v1/sales", mnAdmin, map[string]any{
		"id": sale, "name": "Limited tea", "price_cents": 9900, "stock": units, "per_user_limit": 1,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "lottery", "entries_close_at": closeAt.Format(time.RFC3339Nano)},
	}); a.status != http.StatusCreated {
		t.Fatalf("create lottery: %s %v %v", a.key(), a.body, a.err)
	}

	tokens := make([]string, entrants)
	for i := range tokens {
		tokens[i] = c.token(fmt.Sprintf("%s-e%d", sale, i))
	}
	var entered atomic.Int64
	fanOut(32, func(yield func(int) bool) {
		for i := range entrants {
			if !yield(i) {
				return
			}
		}
	}, func(i int) {
		a := c.do(i%nodes, "POST", "/api/v1/sales/"+sale+"/entries", tokens[i], map[string]any{"qty": 1})
		if a.status != http.StatusCreated {
			t.Errorf("entry %d: %s %v %v", i, a.key(), a.body, a.err)
			return
		}
		entered.Add(1)
	})
	if t.Failed() {
		t.FailNow()
	}
	if time.Now().After(closeAt) {
		t.Fatalf("the entries took longer than the window of %s", window)
	}
	t.Logf("%d entries by %s, %s before close", entered.Load(), time.Since(now).Round(time.Millisecond), time.Until(closeAt).Round(time.Millisecond))

	// The node that runs the draw logs its start; it is killed once it
	// has reserved some winners (recorded in Redis) and not all.
	store, err := redis.New(context.Background(), redisURL, redis.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	wonNow := func() int {
		won, err := store.Lottery().AllWon(context.Background(), sale)
		if err != nil {
			t.Fatal(err)
		}
		return len(won)
	}
	drawer := -1
	waitFor(t, time.Until(closeAt)+30*time.Second, "a node starts the draw", func() bool {
		for i, n := range c.nodes {
			b, _ := os.ReadFile(n.logs)
			if bytes.Contains(b, []byte("lottery draw started")) && bytes.Contains(b, []byte(sale)) {
				drawer = i
				return true
			}
		}
		return false
	})
	waitFor(t, 30*time.Second, "the drawing node reserves its first winners", func() bool { return wonNow() > 0 })
	c.nodes[drawer].kill()
	atKill := wonNow()
	if atKill == 0 || atKill >= units {
		t.Fatalf("killed with %d of %d winners reserved: not during the draw", atKill, units)
	}
	t.Logf("node%d SIGKILLed with %d of %d winners reserved", drawer, atKill, units)
	survivor := (drawer + 1) % nodes

	waitFor(t, 60*time.Second, "another node finishes the draw", func() bool {
		return c.do(survivor, "GET", "/api/v1/sales/"+sale+"/draw", "", nil).body["drawn"] == true
	})
	d := c.do(survivor, "GET", "/api/v1/sales/"+sale+"/draw", "", nil).body
	winners, _ := d["winners"].([]any)
	if len(winners) != units || d["entrants"] != float64(entrants) {
		t.Fatalf("draw: %d winners of %v entrants; want %d of %d", len(winners), d["entrants"], units, entrants)
	}
	if n := wonNow(); n != units {
		t.Fatalf("%d buyers hold a winning reservation; want %d", n, units)
	}

	// Every entrant has a result; the winners' reservations are distinct
	// and each becomes an order.
	var (
		mu       sync.Mutex
		resOf    = map[string]int{} // reservation id -> winner
		statuses = map[string]int{}
	)
	fanOut(16, func(yield func(int) bool) {
		for i := range entrants {
			if !yield(i) {
				return
			}
		}
	}, func(i int) {
		a := c.do(survivor+i, "GET", "/api/v1/sales/"+sale+"/entries/mine", tokens[i], nil)
		st, _ := a.body["status"].(string)
		mu.Lock()
		defer mu.Unlock()
		statuses[st]++
		if st == "won" {
			id, _ := a.body["reservation_id"].(string)
			if prev, dup := resOf[id]; dup || id == "" {
				t.Errorf("entrant %d won reservation %q, already entrant %d's", i, id, prev)
			}
			resOf[id] = i
		}
	})
	if statuses["won"] != units || statuses["lost"] != entrants-units || len(statuses) != 2 {
		t.Fatalf("results %v; want %d won and %d lost", statuses, units, entrants-units)
	}
	var last map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		last = c.do(survivor, "GET", "/admin/v1/sales/"+sale, mnAdmin, nil).body
		if last["unsold"] == float64(0) {
			break
		}
		if time.Now().After(deadline) {
			for id, i := range resOf {
				a := c.do(survivor, "GET", "/api/v1/reservations/"+id, tokens[i], nil)
				t.Logf("winner %d: %s %v", i, a.key(), a.body)
			}
			t.Fatalf("not every winner has an order within 60 s: sale %v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for id, i := range resOf {
		a := c.do(survivor, "GET", "/api/v1/reservations/"+id, tokens[i], nil)
		if a.body["status"] != "ordered" || a.body["pay_by"] == nil {
			t.Errorf("winner %d's reservation %s: %s %v", i, id, a.key(), a.body)
		}
	}
	if a := c.do(survivor, "GET", "/admin/v1/failed-orders?limit=10", mnAdmin, nil); a.status != http.StatusOK || len(a.body["failed_orders"].([]any)) != 0 {
		t.Fatalf("failed orders: %s %v", a.key(), a.body)
	}

	var out bytes.Buffer
	if err := runDraw(context.Background(), []string{"verify", "--url", c.nodes[survivor].url(), "--sale", sale}, &out, &out); err != nil {
		t.Fatalf("draw verify: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("verified: %d winners", units)) {
		t.Fatalf("draw verify said:\n%s", out.String())
	}
}
