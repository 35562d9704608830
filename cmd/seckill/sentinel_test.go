package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestSentinelFailover is issue 10's failover on private processes: a
// primary, a replica and three sentinels (quorum 2); an engine connected
// through the sentinels with durability replicas:1; a rush; the primary
// killed with SIGKILL mid-rush; the sentinels promote the replica; the old
// primary comes back and the sentinels make it the new primary's replica;
// the rush goes on. The engine follows the new primary without a restart
// (claims are acknowledged again), every 202 ends ordered, nothing is
// lost, oversold, or over the limit.
func TestSentinelFailover(t *testing.T) {
	const stock, buyers = 600, 1300
	primary := redistest.StartServer(t)
	replica := redistest.StartReplica(t, primary)
	sentinels := redistest.StartSentinels(t, primary, 3, 2, 1, redistest.SentinelTiming{
		DownAfter: time.Second, FailoverTimeout: 3 * time.Second,
	})
	e, logs := healingEngine(t, sentinels.URL(), "replicas:1")
	sale := e.liveSale(stock, 1)

	w := &waves{e: e, sale: sale}
	acked, wave := &w.acked, w.run
	wave(0, stock/3)
	rushed := make(chan struct{})
	go func() { defer close(rushed); wave(stock/3, buyers) }()

	// Mid-rush: SIGKILL the primary once half the stock is claimed.
	if !servicetest.Eventually(30*time.Second, func() bool { return acked.Load() >= stock/2 }) {
		t.Fatalf("rush stalled before the kill: %d acknowledged", acked.Load())
	}
	primary.Kill()
	killed := time.Now()
	atKill := acked.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newPrimary, err := sentinels.WaitFailover(ctx, primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	failedOver := time.Now()
	atFailover := acked.Load()
	if newPrimary != replica.Addr {
		t.Fatalf("sentinels elected %s; want the replica %s", newPrimary, replica.Addr)
	}
	// The old primary comes back (empty: no persistence) and the
	// sentinels turn it into the new primary's replica, so WAIT 1 can
	// be satisfied again. On a loaded machine the busy new primary can
	// miss down-after while it feeds the full sync and be failed over in
	// turn (to the old primary, by then its copy): the engine follows
	// whichever primary the sentinels settle on.
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	settleCtx, cancelSettle := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelSettle()
	settled, err := sentinels.WaitReplicated(settleCtx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if settled != newPrimary {
		t.Logf("failover: the sentinels failed over again, from %s to %s", newPrimary, settled)
	}
	replicaBackAt := time.Now()
	replicaBack := replicaBackAt.Sub(failedOver)
	// The engine follows: a claim is acknowledged after the failover
	// (WAIT 1 needs the replica back, so not before it).
	followed := servicetest.Eventually(30*time.Second, func() bool { return acked.Load() > atFailover })
	follow, atFollow := time.Since(replicaBackAt), acked.Load()
	if !followed {
		t.Fatalf("engine did not follow the new primary %s within 30 s: %d acknowledged at the failover, %d now\n%s", settled, atFailover, acked.Load(), logs.String())
	}
	<-rushed
	claims, outcomes := w.claims, w.outcomes
	t.Logf("failover: %d acknowledged at the kill, %d when the sentinels agreed on %s (%s after the kill), the old primary was its replica again %s after the failover, the engine acknowledged again at most %s after that (%d acknowledged then); answers %v",
		atKill, atFailover, newPrimary, failedOver.Sub(killed).Round(time.Millisecond), replicaBack.Round(time.Millisecond), follow.Round(time.Millisecond), atFollow, outcomes)

	_, counts := e.settleCounted(claims, 60*time.Second)
	ledger, units, overLimit, failedBy := e.tallyLedger(sale, 1)
	lost := failedBy[seckill.ReasonLostInStockStore]
	alerts := strings.Count(logs.String(), "ALERT")
	t.Logf("failover: acknowledged %d, orders %d (%d units), failed %d %v, lost %d, over-limit buyers %d, try_later answers %d, alerts %d, unsold %d (stock %d); finals %v",
		len(claims), len(ledger.Orders), units, len(ledger.Failed), failedBy, lost, overLimit,
		outcomes["503 "+seckill.ETRYLATER], alerts, ledger.Sale.Unsold, stock, counts)

	if units > stock || ledger.Sale.Unsold < 0 {
		t.Errorf("oversold: %d units of orders for %d on sale, unsold %d", units, stock, ledger.Sale.Unsold)
	}
	if overLimit != 0 {
		t.Errorf("%d buyers over the limit of 1", overLimit)
	}
	if len(ledger.Failed) != 0 || lost != 0 || counts["ordered"] != len(claims) {
		t.Errorf("%d failed orders (%v), %d lost, %d of %d claims ordered; want every claim ordered", len(ledger.Failed), failedBy, lost, counts["ordered"], len(claims))
	}
	// Every unit sold is an acknowledged claim. That includes the claim
	// of a buyer who was answered try_later or unavailable (its batch's
	// WAIT never completed) whose event still became an order while Redis
	// lost the reservation: the heal rebuilds the buyer's count from the
	// orders but not the key's record, so the retry with the same
	// Idempotency-Key meets the limit, and is answered with the order the
	// key made (its digest is in the order row), not limit_exceeded.
	if units != stock || int(units) != len(claims) || outcomes["409 "+seckill.EPURCHASELIMIT] != 0 {
		t.Errorf("%d units ordered for %d acknowledged claims and %d limit_exceeded answers; want the whole stock of %d, each an acknowledged claim", units, len(claims), outcomes["409 "+seckill.EPURCHASELIMIT], stock)
	}
}
