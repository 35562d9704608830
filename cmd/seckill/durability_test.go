package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// tryReserve is one buyer's attempt: status and body, or status 0 when
// the request did not get an answer.
func (e *engine) tryReserve(sale, tok, key string) (int, map[string]any) {
	req, _ := http.NewRequest("POST", e.base+"/api/v1/sales/"+sale+"/reservations", strings.NewReader(`{"qty":1}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body
}

// claim is one acknowledged (202) reservation.
type claim struct{ id, user, tok string }

// rushWith releases buyers on a sale through workers goroutines; each
// buyer retries (same Idempotency-Key, as a careful client does) anything
// but a definite answer, so a stock store that is down or healing only
// delays them. acked counts the 202s as they come.
func (e *engine) rushWith(sale string, from, to, workers int, prefix string, acked *atomic.Int64) (claims []claim, outcomes map[string]int) {
	e.t.Helper()
	outcomes = map[string]int{}
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				user := fmt.Sprintf("%s-%d", prefix, i)
				tok := e.token(user)
				for time.Now().Before(deadline) {
					status, body := e.tryReserve(sale, tok, "k-"+user)
					code := ""
					if eb, ok := body["error"].(map[string]any); ok {
						code, _ = eb["code"].(string)
					}
					mu.Lock()
					outcomes[fmt.Sprintf("%d %s", status, code)]++
					mu.Unlock()
					if status == http.StatusAccepted {
						id, _ := body["reservation_id"].(string)
						mu.Lock()
						claims = append(claims, claim{id: id, user: user, tok: tok})
						mu.Unlock()
						acked.Add(1)
						break
					}
					if status == http.StatusConflict {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return claims, outcomes
}

// settle polls every claim as its buyer would until it is ordered or
// failed, and returns the final statuses (with the failure reason).
func (e *engine) settle(claims []claim, within time.Duration) map[string]string {
	e.t.Helper()
	final := map[string]string{}
	var mu sync.Mutex
	deadline := time.Now().Add(within)
	fanOut(16, slices.Values(claims), func(c claim) {
		last := ""
		for time.Now().Before(deadline) {
			r := e.do("GET", "/api/v1/reservations/"+c.id, c.tok, nil)
			st, _ := r.body["status"].(string)
			if st == "ordered" || st == "failed" {
				if reason, _ := r.body["reason"].(string); reason != "" {
					st += " " + reason
				}
				last = st
				break
			}
			last = fmt.Sprintf("%d %v", r.status, r.body)
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		final[c.id] = last
		mu.Unlock()
	})
	return final
}

// lossScenario is one power-loss run and what the test expects of it.
type lossScenario struct {
	name       string
	durability string
	appendsync string
	replica    bool
	// rollback restores the primary's directory to a copy taken ~0.5 s
	// before it is killed: what the disk held at the power loss.
	rollback bool
	// buckets spreads the sale's stock over that many stock buckets.
	buckets int64
}

// TestPowerLoss is the operator's experiment of issue 10 on private
// Redis processes: a rush on a sale, Redis killed with SIGKILL mid-rush and
// started again (rolled back to what its disk held, under everysec; or
// failed over to its replica), every buyer told "claimed" trying once
// more. Whatever the durability mode: the database is never oversold,
// nobody is over the limit, every 202 ends ordered or failed (alerted),
// and the public remaining comes back to the stock minus what the database
// sold. With none, reconciliation reports the loss; with fsync and
// replicas:1 nothing fails and nothing is lost.
func TestPowerLoss(t *testing.T) {
	for _, sc := range []lossScenario{
		{name: "none", durability: "none", appendsync: "everysec", rollback: true},
		{name: "none, 3 buckets", durability: "none", appendsync: "everysec", rollback: true, buckets: 3},
		{name: "fsync", durability: "fsync", appendsync: "always"},
		{name: "replicas:1", durability: "replicas:1", appendsync: "everysec", replica: true, rollback: true},
	} {
		t.Run(sc.name, func(t *testing.T) { testPowerLoss(t, sc) })
	}
}

func testPowerLoss(t *testing.T, sc lossScenario) {
	const stock, buyers = 600, 1300
	primary := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", sc.appendsync)
	var replica *redistest.Server
	if sc.replica {
		replica = redistest.StartReplica(t, primary, "--appendonly", "yes")
	}
	proxy := servicetest.StartProxy(t, primary.Addr)
	e, logs := healingEngine(t, "redis://"+proxy.Addr(), sc.durability)
	sale := e.liveSale(stock, 1)
	if sc.buckets > 1 {
		sale = e.liveBucketedSale(stock, 1, sc.buckets)
	}

	// The rush goes on across the power loss: a first wave of buyers,
	// the copy of what the disk holds, a second wave (what the loss will
	// take), the kill, then the rest of the buyers.
	w := &waves{e: e, sale: sale}
	acked, wave := &w.acked, w.run
	wave(0, stock/3)
	snap, err := primary.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	atSnap := acked.Load()
	start := time.Now()
	wave(stock/3, stock/2)
	if d := 500*time.Millisecond - time.Since(start); d > 0 {
		time.Sleep(d) // ~0.5 s of writes after the copy, as everysec loses
	}
	proxy.Cut()
	primary.Kill()
	atKill := acked.Load()
	if sc.rollback {
		if err := primary.Restore(snap); err != nil {
			t.Fatal(err)
		}
	}
	if sc.replica {
		// Failover: the replica, which WAIT made hold every claim
		// acknowledged, becomes the primary; the old one comes back as
		// its replica.
		promote(t, replica.Addr)
		proxy.Retarget(replica.Addr)
		if err := primary.Start(); err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(replica.Addr)
		redisDo(t, primary.Addr, "REPLICAOF", host, port)
	} else if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	wave(stock/2, buyers)
	res := struct {
		claims   []claim
		outcomes map[string]int
	}{w.claims, w.outcomes}
	t.Logf("%s: claims acknowledged %d (%d at the copy, %d at the kill); answers %v", sc.name, len(res.claims), atSnap, atKill, res.outcomes)

	// Every buyer told "claimed" tries once more, with a new key.
	retried := 0
	for _, c := range res.claims {
		status, body := e.tryReserve(sale, c.tok, "again-"+c.user)
		if status == http.StatusAccepted {
			id, _ := body["reservation_id"].(string)
			res.claims = append(res.claims, claim{id: id, user: c.user, tok: c.tok})
			retried++
		}
	}

	final, counts := e.settleCounted(res.claims, 90*time.Second)
	ledger, units, overLimit, failedBy := e.tallyLedger(sale, 1)
	lost := failedBy[seckill.ReasonLostInStockStore]
	alerts := strings.Count(logs.String(), "ALERT")

	// The public remaining heals to the stock minus the database's units.
	var remaining float64
	healed := servicetest.Eventually(60*time.Second, func() bool {
		r := e.do("GET", "/api/v1/sales/"+sale, "", nil)
		remaining, _ = r.body["remaining"].(float64)
		ledger, err := e.m.orders.Ledger.SaleLedger(context.Background(), sale)
		return err == nil && int64(remaining) == ledger.Sale.Unsold
	})
	rep, err := reconcile.Reconcile(context.Background(), sale, e.m.orders.Ledger, e.m.stock.Ledger(), time.Now(), reconcile.Options{InFlightGrace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: acknowledged %d (%d on the retry), orders %d (%d units), failed %d %v, lost %d, over-limit buyers %d, alerts %d, remaining %v vs database unsold %d (stock %d); reconciliation: balanced %v, oversold %d, lost writes %+v; finals %v",
		sc.name, len(res.claims), retried, len(ledger.Orders), units, len(ledger.Failed), failedBy, lost, overLimit, alerts,
		remaining, ledger.Sale.Unsold, stock, rep.Balanced, rep.Oversold, rep.LostWrites, counts)

	if units > stock || ledger.Sale.Unsold < 0 || rep.Oversold != 0 {
		t.Errorf("oversold: %d units of orders for %d on sale, unsold %d, reconciliation oversold %d", units, stock, ledger.Sale.Unsold, rep.Oversold)
	}
	if overLimit != 0 {
		t.Errorf("%d buyers over the limit of 1", overLimit)
	}
	for id, st := range final {
		if st != "ordered" && !strings.HasPrefix(st, "failed") {
			t.Errorf("claim %s ended %q; want ordered or failed", id, st)
		}
	}
	if len(ledger.Orders)+len(ledger.Failed) != len(res.claims) {
		t.Errorf("%d orders + %d failed orders; want the %d claims acknowledged", len(ledger.Orders), len(ledger.Failed), len(res.claims))
	}
	heals := strings.Count(logs.String(), "sale healed from the database")
	t.Logf("%s: %d heals", sc.name, heals)
	// Whether the heal watcher or the lost-claim sweeper reaches the
	// forgotten claims first, and how much Redis re-sells before the heal,
	// is a race (0 or 1 heals, some claims failing for insufficient
	// database stock): the accounting above is what must hold. The heal of
	// a bucketed sale itself is shown exactly by internal/redis's
	// testBucketHeal.
	if alerts < len(ledger.Failed) {
		t.Errorf("%d failed orders but %d ALERT lines", len(ledger.Failed), alerts)
	}
	if !healed {
		t.Errorf("public remaining %v never came back to the database's unsold %d", remaining, ledger.Sale.Unsold)
	}
	if sc.durability == "none" {
		if !rep.LostWrites.Detected || rep.Balanced {
			t.Errorf("reconciliation after the loss: balanced %v, lost writes %+v; want the loss reported", rep.Balanced, rep.LostWrites)
		}
		return
	}
	if len(ledger.Failed) != 0 || lost != 0 || counts["ordered"] != len(res.claims) {
		t.Errorf("%s: %d failed orders (%v), %d lost, %d of %d claims ordered; want none failed or lost", sc.name, len(ledger.Failed), failedBy, lost, counts["ordered"], len(res.claims))
	}
	if rep.LostWrites.Detected {
		t.Errorf("%s: reconciliation reports lost writes %+v", sc.name, rep.LostWrites)
	}
}

// liveBucketedSale is liveSale with the stock over buckets stock buckets.
func (e *engine) liveBucketedSale(stock, limit, buckets int64) string {
	e.t.Helper()
	now := time.Now()
	id := servicetest.UniqueName("t")
	r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": id, "name": "Tea gift set", "price_cents": 9900, "stock": stock, "per_user_limit": limit, "buckets": buckets,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
	})
	if r.status != http.StatusCreated || r.body["buckets"] != float64(buckets) {
		e.t.Fatalf("create sale: %d %v", r.status, r.body)
	}
	return id
}

// healingEngine starts an engine on the Redis at redisURL with durability,
// which notices lost claims within seconds and heals every 200ms; its
// warnings (and ALERT lines) go to logs.
func healingEngine(t *testing.T, redisURL, durability string) (*engine, *servicetest.Buffer) {
	t.Helper()
	logs := &servicetest.Buffer{}
	e := startEngine(t, func(c *Config) {
		c.RedisURL = redisURL
		c.RedisDurability = durability
		c.LostClaimAfter = 5 * time.Second
		c.HealInterval = 200 * time.Millisecond
		c.ReconcileInterval = time.Hour
	}, func(m *Main) {
		m.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	return e, logs
}

// waves rushes a sale's buyers in waves (rushWith, 12 workers, buyers
// "b-<n>"), adding up the claims and answers of all of them; acked
// counts the 202s as they come. Waves may run concurrently.
type waves struct {
	e     *engine
	sale  string
	acked atomic.Int64

	mu       sync.Mutex
	claims   []claim
	outcomes map[string]int
}

func (w *waves) run(from, to int) {
	c, o := w.e.rushWith(w.sale, from, to, 12, "b", &w.acked)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims = append(w.claims, c...)
	if w.outcomes == nil {
		w.outcomes = map[string]int{}
	}
	for k, v := range o {
		w.outcomes[k] += v
	}
}

// settleCounted is settle, with how many claims ended in each status.
func (e *engine) settleCounted(claims []claim, within time.Duration) (final map[string]string, counts map[string]int) {
	e.t.Helper()
	final = e.settle(claims, within)
	counts = map[string]int{}
	for _, st := range final {
		counts[st]++
	}
	return final, counts
}

// tallyLedger reads the sale's orders from the database: the units held
// (cancelled orders aside), how many buyers hold more than limit, and the
// failed orders by reason.
func (e *engine) tallyLedger(sale string, limit int64) (ledger *seckill.SaleLedger, units int64, overLimit int, failedBy map[string]int) {
	e.t.Helper()
	ledger, err := e.m.orders.Ledger.SaleLedger(context.Background(), sale)
	if err != nil {
		e.t.Fatal(err)
	}
	held := map[string]int64{}
	for _, o := range ledger.Orders {
		if o.Status != seckill.OrderCancelled {
			held[o.UserID] += o.Qty
			units += o.Qty
		}
	}
	for _, n := range held {
		if n > limit {
			overLimit++
		}
	}
	failedBy = map[string]int{}
	for _, f := range ledger.Failed {
		reason, _, _ := strings.Cut(f.Reason, ":")
		failedBy[reason]++
	}
	return ledger, units, overLimit, failedBy
}

func redisDo(t *testing.T, addr string, args ...string) {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(context.Background(), c.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(); err != nil {
		t.Fatalf("%s %v: %v", addr, args, err)
	}
}

func promote(t *testing.T, addr string) {
	t.Helper()
	redisDo(t, addr, "REPLICAOF", "NO", "ONE")
}
