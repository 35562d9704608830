package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestBuckets runs the stock store's and the restore side's conformance
// suites with every sale split into 3 buckets, then the bucket-specific
// tests, on the embedded server, Redis and a Redis Cluster.
func TestBuckets(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		bucketed := func(t *testing.T) *Store {
			s := newStore(t)
			s.minBuckets = 3
			return s
		}
		unordered := conformance.UnorderedAcrossBuyers("buyers of different buckets are decided at once, in their buckets")
		t.Run("Conformance", func(t *testing.T) {
			conformance.StockStore(t, func(t *testing.T) seckill.StockStore { return bucketed(t).StockStore() }, unordered)
		})
		t.Run("RestoreConformance", func(t *testing.T) {
			conformance.StockRestorer(t, func(t *testing.T) conformance.RestoringStockStore { return restoring(bucketed(t)) }, unordered)
		})
		runParallel(t, newStore, []storeTest{
			{"Rush", testBucketRush},
			{"OneHotBucket", testOneHotBucket},
			{"CrashMidMove", testCrashMidMove},
			{"Replays", testBucketReplays},
		})
		runParallel(t, bucketed, []storeTest{
			{"Archive", testArchive},
			{"Counters", testCounters},
		})
	})
}

// usersOf returns n user ids whose home bucket in bs is b (b < 0: any).
func usersOf(bs *bucketSet, b, n int, prefix string) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("%s-%d", prefix, i)
		if b < 0 || bs.home(u) == b {
			out = append(out, u)
		}
	}
	return out
}

// rushResult is what a rush saw: answers by outcome, units each user got,
// and the phantom sold-outs: sold_out answers received before some request
// that then reserved was even sent, so a unit was still to be had
// somewhere after that buyer heard sold_out. worstPhantom is the longest
// such window, up to the reservation's answer.
type rushResult struct {
	outcomes     map[seckill.Outcome]int
	held         map[string]int64
	phantoms     int
	worstPhantom time.Duration
	took         time.Duration
}

// rush sends every user's tries requests of one unit, batches of up to
// batch requests from 32 goroutines at once.
func rush(t *testing.T, s *Store, saleID string, users []string, tries, batch int) rushResult {
	t.Helper()
	type call struct {
		sent, answered time.Time
		soldOut, won   bool
	}
	var (
		mu    sync.Mutex
		calls []call
		res   = rushResult{outcomes: map[seckill.Outcome]int{}, held: map[string]int64{}}
		next  atomic.Int64
		wg    sync.WaitGroup
		all   = len(users) * tries
	)
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(batch))) - batch
				if lo >= all {
					return
				}
				hi := min(lo+batch, all)
				reqs := make([]seckill.ReserveRequest, 0, hi-lo)
				for i := lo; i < hi; i++ {
					reqs = append(reqs, request(saleID, users[i%len(users)], 1, ""))
				}
				c := call{sent: time.Now()}
				got, err := s.StockStore().Reserve(context.Background(), saleID, reqs)
				c.answered = time.Now()
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				mu.Lock()
				for i, r := range got {
					res.outcomes[r.Outcome]++
					c.soldOut = c.soldOut || r.Outcome == seckill.OutcomeSoldOut
					if r.Outcome == seckill.OutcomeReserved {
						c.won = true
						res.held[reqs[i].UserID] += r.Qty
					}
				}
				calls = append(calls, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	for _, so := range calls {
		if !so.soldOut {
			continue
		}
		phantom := false
		for _, w := range calls {
			if w.won && w.sent.After(so.answered) {
				phantom = true
				res.worstPhantom = max(res.worstPhantom, w.answered.Sub(so.answered))
			}
		}
		if phantom {
			res.phantoms++
		}
	}
	return res
}

// wantNoPhantoms fails the test if any buyer heard sold_out while a unit
// was still to be had.
func (r rushResult) wantNoPhantoms(t *testing.T) {
	t.Helper()
	if r.phantoms != 0 {
		t.Errorf("%d calls answered sold_out before a call that then reserved was sent (up to %s before its answer); want none", r.phantoms, r.worstPhantom)
	}
}

// preheatBuckets preheats a live sale of stock units and limit split into
// 3 buckets, and returns it with its buckets.
func preheatBuckets(t *testing.T, s *Store, stock, limit int64) (*seckill.Sale, *bucketSet) {
	t.Helper()
	sale := liveSale(stock, limit)
	sale.Buckets = 3
	mustPreheat(t, s, sale)
	bs, err := s.buckets(context.Background(), sale.ID)
	if err != nil || bs.k() != 3 {
		t.Fatalf("buckets = %v, %v; want 3", bs, err)
	}
	return sale, bs
}

func wantLevel(t *testing.T, s *Store, saleID string, total, reserved int64) {
	t.Helper()
	lvl, err := s.StockStore().Stock(context.Background(), saleID)
	if err != nil || lvl.Total != total || lvl.Reserved != reserved {
		t.Errorf("Stock = %+v, %v; want total %d, reserved %d", lvl, err, total, reserved)
	}
}

// testBucketRush: 3 buckets, 300 units, a limit of 2, 400 buyers trying 3
// times each: exactly 300 sold, nobody over 2, every unit's reservation
// in the outboxes, and the sold-out answers all after the last sale.
func testBucketRush(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, bs := preheatBuckets(t, s, 300, 2)
	r := rush(t, s, sale.ID, usersOf(bs, -1, 400, "u"), 3, 16)
	if r.outcomes[seckill.OutcomeReserved] != 300 {
		t.Errorf("outcomes %v; want 300 reserved", r.outcomes)
	}
	for u, n := range r.held {
		if n > 2 {
			t.Errorf("user %s holds %d units with a limit of 2", u, n)
		}
	}
	wantLevel(t, s, sale.ID, 300, 300)
	if n, err := s.Outbox().OutboxLen(ctx, sale.ID); err != nil || n != 300 {
		t.Errorf("OutboxLen = %d, %v; want 300 over the buckets", n, err)
	}
	r.wantNoPhantoms(t)
	registered, err := s.Outbox().OutboxSales(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range bs.tags {
		found := false
		for _, id := range registered {
			found = found || id == tag
		}
		if !found {
			t.Errorf("bucket %s's outbox is not registered for the relay (%v)", tag, registered)
		}
	}
}

// testOneHotBucket: every buyer's home is bucket 0, which starts with a
// third of the units: they still buy all of them, the rebalance moving
// the other buckets' units in, and nobody hears sold_out before the end.
func testOneHotBucket(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, bs := preheatBuckets(t, s, 300, 1)
	users := usersOf(bs, 0, 500, "hot")
	r := rush(t, s, sale.ID, users, 1, 8)
	t.Logf("one hot bucket: %v in %s; phantom sold-outs %d (worst %s)", r.outcomes, r.took, r.phantoms, r.worstPhantom)
	if r.outcomes[seckill.OutcomeReserved] != 300 || r.outcomes[seckill.OutcomeSoldOut] != 200 {
		t.Errorf("outcomes %v; want 300 reserved, 200 sold out", r.outcomes)
	}
	r.wantNoPhantoms(t)
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	if states[0].reserved != 300 || states[0].total != 300 || states[1].total != 0 || states[2].total != 0 {
		t.Errorf("buckets %+v; want all 300 units moved into bucket 0 and reserved there", states)
	}
	if states[0].movedIn != 200 || states[1].movedOut+states[2].movedOut != 200 {
		t.Errorf("moves: %+v; want 200 units moved in from the other two", states)
	}
}

// testCrashMidMove: a mover dies between its two steps. The units are in
// no bucket (an undersell), Stock still counts them, nothing is oversold,
// and the next rebalance after the journal entry went stale finishes the
// move: the units sell.
func testCrashMidMove(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, bs := preheatBuckets(t, s, 30, 1)
	users := usersOf(bs, 1, 40, "c")
	// Bucket 1 holds 10 units; its 11th buyer makes the rebalance, which
	// crashes after taking units out of the donor.
	crash := errors.New("crashed between the two steps")
	var crashes atomic.Int64
	s.afterMoveOut = func() error {
		if crashes.Add(1) == 1 {
			return crash
		}
		return nil
	}
	s.moveStale = time.Hour
	for i := range 10 {
		if got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, users[i], 1, "")}); err != nil || got[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("buyer %d: %+v, %v", i, got, err)
		}
	}
	got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, users[10], 1, "")})
	if err != nil || got[0].Outcome != seckill.OutcomeSoldOut {
		t.Fatalf("the buyer whose rebalance crashed: %+v, %v; want sold_out (a phantom, until repaired)", got, err)
	}
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	var inBuckets int64
	for _, st := range states {
		inBuckets += st.total
	}
	moving := inTransit(states)
	if moving == 0 || inBuckets+moving != 30 {
		t.Fatalf("after the crash: %d units in buckets, %d journalled; want some journalled, 30 in all", inBuckets, moving)
	}
	wantLevel(t, s, sale.ID, 30, 10)
	if n, err := s.Admin().RepairMoves(ctx, sale.ID); err != nil || n != 0 {
		t.Errorf("RepairMoves of a fresh journal entry = %d, %v; want 0 (its mover may still be alive)", n, err)
	}
	// The entry goes stale: the next buyer's rebalance finishes it.
	s.moveStale = time.Nanosecond
	servicetest.WaitFor(t, 10*time.Second, "the stale move finished and its buyer served", func() bool {
		got, err = s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, users[10], 1, "")})
		return err == nil && got[0].Outcome == seckill.OutcomeReserved
	})
	r := rush(t, s, sale.ID, usersOf(bs, -1, 100, "after"), 1, 4)
	wantLevel(t, s, sale.ID, 30, 30)
	if sold := 11 + r.outcomes[seckill.OutcomeReserved]; sold != 30 {
		t.Errorf("%d units sold in all; want 30", sold)
	}
	if st, _ := s.readBuckets(ctx, bs); inTransit(st) != 0 {
		t.Errorf("journal not empty after the repair: %+v", st)
	}
}

// testBucketReplays: the idempotency lookup of the sold-out fast path finds
// every buyer's key in their home bucket.
func testBucketReplays(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, _ := preheatBuckets(t, s, 30, 2)
	var reqs, again []seckill.ReserveRequest
	for i := range 12 {
		r := request(sale.ID, fmt.Sprintf("buyer-%d", i), 1, fmt.Sprintf("key-%d", i))
		reqs = append(reqs, r)
		replay := request(sale.ID, r.UserID, 1, r.IdempotencyKey)
		if i%4 == 3 {
			replay.Qty = 2 // the key with another qty
		}
		again = append(again, replay, request(sale.ID, r.UserID, 1, "")) // and one without a key
	}
	if got, err := s.StockStore().Reserve(ctx, sale.ID, reqs); err != nil {
		t.Fatal(err)
	} else {
		for i, r := range got {
			if r.Outcome != seckill.OutcomeReserved {
				t.Fatalf("reserve %d: %+v", i, r)
			}
		}
	}
	got, err := s.StockStore().Replays(ctx, sale.ID, again)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		want := seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: reqs[i].ReservationID, Qty: 1}
		if i%4 == 3 {
			want = seckill.ReserveResult{Outcome: seckill.OutcomeKeyReused}
		}
		if got[2*i] != want || got[2*i+1] != (seckill.ReserveResult{}) {
			t.Errorf("replays of buyer %d: %+v, %+v; want %+v and nothing", i, got[2*i], got[2*i+1], want)
		}
	}
}

// TestBucketsSpreadOverMasters: a 3-bucket sale on a 3-master Cluster has
// one bucket on each master.
func TestBucketsSpreadOverMasters(t *testing.T) {
	c := redistest.StartCluster(t)
	s := connect(t, c.URL())
	for range 20 {
		bs := newBucketSet(servicetest.UniqueName("sale_"), 3)
		seen := map[int]bool{}
		for _, tag := range bs.tags {
			seen[int(keySlot(tag))*3/slotCount] = true
		}
		if len(seen) != 3 {
			slots := []uint16{}
			for _, tag := range bs.tags {
				slots = append(slots, keySlot(tag))
			}
			t.Errorf("buckets %v on slots %v: not one per third of the slots", bs.tags, slots)
		}
	}
	// keySlot agrees with the server.
	ctx := context.Background()
	for _, tag := range []string{"a", "sale_1", "sale_1~2~17", "tea-2030"} {
		key := "k:{" + tag + "}:stock"
		n, err := s.client.Do(ctx, s.client.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err != nil || uint16(n) != keySlot(tag) {
			t.Errorf("CLUSTER KEYSLOT %s = %d, %v; keySlot says %d", key, n, err, keySlot(tag))
		}
	}
}
