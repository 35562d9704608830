package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
			{"Heal", testBucketHeal},
			{"HealAbort", testBucketHealAbort},
		})
		runParallel(t, bucketed, []storeTest{
			{"Archive", testArchive},
			{"Counters", testCounters},
			{"HealKeepsAdmission", testHealKeepsAdmission},
			{"HealBringsKeysBack", testHealBringsKeysBack},
			{"LoaderHoldsALostSale", testLoaderHoldsALostSale},
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

// TestBucketsSpreadOverMasters: a 3-bucket sale on a 3-master Cluster
// whose slots split as redis-cli splits them has one bucket on each
// master, as the Cluster itself says (CLUSTER SLOTS), for random sales and
// for sales whose own slot is at either end of a master's range.
//
// Except on two slots, 10922 and 16383, where the layout's thirds
// (slot / 5461) and redis-cli's disagree about bucket 0's master: a sale
// there has two buckets on one master. It sells the same, less spread.
// Every node computes a sale's layout from its id, so changing that
// would move a live sale's buckets under a rolling upgrade, with nodes of
// both versions selling from different keys: TestBucketLayoutIsStable
// holds the layout still, these two slots included.
func TestBucketsSpreadOverMasters(t *testing.T) {
	c := redistest.StartCluster(t)
	s := connect(t, c.URL())
	masterOf := clusterMasters(t, s)
	sales := []string{}
	for range 20 {
		sales = append(sales, servicetest.UniqueName("sale_"))
	}
	for _, slot := range []uint16{0, 5460, 5461, 10923} {
		sales = append(sales, saleOnSlot(slot))
	}
	for _, sale := range sales {
		if slot := keySlot(sale); slot == 10922 || slot == 16383 {
			t.Logf("sale %s is on slot %d, where two buckets share a master", sale, slot)
			continue
		}
		bs := newBucketSet(sale, 3)
		seen := map[string]bool{}
		slots := []uint16{}
		for _, tag := range bs.tags {
			seen[masterOf(keySlot(tag))] = true
			slots = append(slots, keySlot(tag))
		}
		if len(seen) != 3 {
			t.Errorf("buckets %v on slots %v: on %d masters, want 3", bs.tags, slots, len(seen))
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

// TestBucketLayoutIsStable: a sale's bucket tags are what every earlier
// version computed from its id. Nodes derive them, never store them, so
// nodes of two versions selling one sale must agree (slots 10922 and
// 16383 included: sale_s18543 and sale_s29426).
func TestBucketLayoutIsStable(t *testing.T) {
	for _, c := range []struct {
		sale string
		k    int
		want string
	}{
		{"tea", 3, "tea tea~1~4 tea~2~21"},
		{"sale_1", 3, "sale_1 sale_1~1~0 sale_1~2~2"},
		{"sale_s18543", 3, "sale_s18543 sale_s18543~1~8 sale_s18543~2~0"},
		{"sale_s29426", 3, "sale_s29426 sale_s29426~1~22 sale_s29426~2~1"},
		{"tea", 4, "tea tea~1~3 tea~2~20 tea~3~3"},
		{"sale_s29426", 4, "sale_s29426 sale_s29426~1~3 sale_s29426~2~23 sale_s29426~3~3"},
		{"tea", 1, "tea"},
	} {
		if got := strings.Join(newBucketSet(c.sale, c.k).tags, " "); got != c.want {
			t.Errorf("%s in %d buckets: %s, want %s", c.sale, c.k, got, c.want)
		}
	}
}

// clusterMasters returns the master (its address) serving each slot, as
// CLUSTER SLOTS tells.
func clusterMasters(t *testing.T, s *Store) func(slot uint16) string {
	t.Helper()
	ranges, err := s.client.Do(t.Context(), s.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		lo, hi int64
		addr   string
	}
	var spans []span
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			t.Fatalf("CLUSTER SLOTS entry %v: %v", r, err)
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		node, err := f[2].ToArray()
		if err != nil || len(node) < 2 {
			t.Fatalf("CLUSTER SLOTS master %v: %v", f[2], err)
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		spans = append(spans, span{lo, hi, fmt.Sprintf("%s:%d", host, port)})
	}
	return func(slot uint16) string {
		for _, sp := range spans {
			if int64(slot) >= sp.lo && int64(slot) <= sp.hi {
				return sp.addr
			}
		}
		t.Fatalf("no master serves slot %d (%v)", slot, spans)
		return ""
	}
}

// saleOnSlot is a sale id whose hash slot is slot.
func saleOnSlot(slot uint16) string {
	for n := 0; ; n++ {
		if sale := "sale_s" + strconv.Itoa(n); keySlot(sale) == slot {
			return sale
		}
	}
}

// testBucketHeal: one bucket of a 3-bucket sale vanished (its shard came
// back empty), another rolled back a claim and a move out of it, and a
// move was journalled when the heal began. The heal puts each order's
// record and units back in its buyer's home bucket, gives every bucket a
// share of what the database left and no more, and a move from before the
// heal never lands afterwards: the rush that follows sells exactly the
// rest, nobody twice.
func testBucketHeal(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, bs := preheatBuckets(t, s, 30, 1)
	var orders []seckill.ReservationRecord
	for b := range 3 {
		for _, u := range usersOf(bs, b, 3, fmt.Sprintf("h%d", b)) {
			req := request(sale.ID, u, 1, "")
			got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{req})
			if err != nil || got[0].Outcome != seckill.OutcomeReserved {
				t.Fatalf("reserve %s: %+v, %v", u, got, err)
			}
			orders = append(orders, seckill.ReservationRecord{ReservationID: req.ReservationID, UserID: u, Qty: 1, ReservedAt: time.Now()})
		}
	}
	do := func(args ...string) {
		t.Helper()
		if err := s.client.Do(ctx, s.client.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	// Bucket 2 is gone; bucket 1 forgot its last claim and a move of 4
	// units out of it; bucket 0 journalled a move of 2 to bucket 1 whose
	// mover is still alive.
	for _, k := range s.keys(bs.tags[2]) {
		do("DEL", k)
	}
	lost := orders[5]
	do("HSET", s.keys(bs.tags[1])[keyStock], "reserved", "2", "total", "14")
	do("HDEL", s.keys(bs.tags[1])[keyRes], recordField(lost.ReservationID))
	do("HDEL", s.keys(bs.tags[1])[keyBuyers], lost.UserID)
	do("HINCRBY", s.keys(bs.tags[0])[keyStock], "total", "-2")
	do("HSET", s.movesKey(bs.tags[0]), "m1", fmt.Sprintf("1:2:%d", time.Now().Unix()))

	h := s.Healer()
	if st, err := h.SaleState(ctx, sale.ID); err != nil || st.Loaded || st.Buckets != 3 {
		t.Fatalf("SaleState with a bucket gone = %+v, %v; want not loaded, 3 buckets", st, err)
	}
	const token = "1:bucketheal"
	if recreated, err := h.BeginHeal(ctx, sale, token); err != nil || !recreated {
		t.Fatalf("BeginHeal = %v, %v; want the vanished bucket recreated", recreated, err)
	}
	for b := range 3 {
		u := usersOf(bs, b, 1, fmt.Sprintf("late%d", b))[0]
		if _, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, u, 1, "")}); !errors.Is(err, ErrHealing) {
			t.Errorf("a claim in bucket %d while healing: %v; want ErrHealing", b, err)
		}
	}
	if n, err := s.move(ctx, bs, 0, 1, 1); err != nil || n != 0 {
		t.Errorf("a move out of a healing bucket = %d, %v; want none", n, err)
	}
	if a, r, err := h.HealPage(ctx, sale.ID, token, orders[:5], nil); err != nil || a != 0 || r != 0 {
		t.Errorf("HealPage of records Redis holds = %d added, %d released, %v; want none", a, r, err)
	}
	if a, r, err := h.HealPage(ctx, sale.ID, token, orders[5:], nil); err != nil || a != 4 || r != 0 {
		t.Errorf("HealPage of the lost records = %d added, %d released, %v; want 4 added", a, r, err)
	}
	row := *sale
	row.Unsold = 30 - 9
	if _, _, err := h.ApplyHeal(ctx, &row, token, nil, nil); err != nil {
		t.Fatal(err)
	}
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	want := seckill.HealShares(30, 9, []int64{3, 3, 3})
	for b, st := range states {
		if st.reserved != 3 || st.available() != want[b] || len(st.journal) != 0 {
			t.Errorf("bucket %d after the heal: reserved %d, %d unreserved, journal %v; want 3, %d, none", b, st.reserved, st.available(), st.journal, want[b])
		}
	}
	if st, err := h.SaleState(ctx, sale.ID); err != nil || !st.Loaded || st.Healing || st.Total != 30 || st.Reserved != 9 || st.Heals != 1 {
		t.Errorf("SaleState after the heal = %+v, %v; want loaded, not healing, 30 total, 9 reserved, 1 heal", st, err)
	}
	// The mover of m1 wakes up: its units are in the shares already.
	if code, err := moveInScript.Exec(ctx, s.client, []string{s.keys(bs.tags[1])[keyStock], s.movesInKey(bs.tags[1])}, []string{"m1", "2"}).AsInt64(); err != nil || code != 0 {
		t.Errorf("the journalled move landing after the heal = %d, %v; want 0 (applied)", code, err)
	}
	wantLevel(t, s, sale.ID, 30, 9)
	for _, o := range orders {
		got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, o.UserID, 1, "")})
		if err != nil || got[0].Outcome != seckill.OutcomeLimitExceeded {
			t.Errorf("%s after the heal: %+v, %v; want limit_exceeded", o.UserID, got, err)
		}
	}
	r := rush(t, s, sale.ID, usersOf(bs, -1, 40, "after"), 2, 8)
	if r.outcomes[seckill.OutcomeReserved] != 21 {
		t.Errorf("rush after the heal: %v; want exactly the 21 units the database left", r.outcomes)
	}
	for u, n := range r.held {
		if n > 1 {
			t.Errorf("%s holds %d, over the limit of 1", u, n)
		}
	}
	wantLevel(t, s, sale.ID, 30, 30)
}

// testBucketHealAbort: a bucketed heal aborted before any bucket got its
// new share lets claims in again; one aborted after a bucket got it keeps
// the whole sale healing (the other buckets may still count units the
// loss took), for the next heal to finish.
func testBucketHealAbort(t *testing.T, s *Store) {
	ctx := context.Background()
	sale, bs := preheatBuckets(t, s, 30, 1)
	h := s.Healer()
	claim := func(b int, prefix string) error {
		u := usersOf(bs, b, 1, prefix)[0]
		_, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, u, 1, "")})
		return err
	}
	if _, err := h.BeginHeal(ctx, sale, "1:a"); err != nil {
		t.Fatal(err)
	}
	if err := h.AbortHeal(ctx, sale.ID, "1:a"); err != nil {
		t.Fatalf("AbortHeal before any share: %v", err)
	}
	for b := range 3 {
		if err := claim(b, fmt.Sprintf("a%d", b)); err != nil {
			t.Errorf("a claim in bucket %d after the abort: %v", b, err)
		}
	}

	if _, err := h.BeginHeal(ctx, sale, "2:b"); err != nil {
		t.Fatal(err)
	}
	// The heal dies after bucket 1 got its share.
	if n, err := healShareScript.Exec(ctx, s.client, []string{s.keys(bs.tags[1])[keyStock], s.movesKey(bs.tags[1])}, []string{"2:b", "5"}).AsInt64(); err != nil || n != 1 {
		t.Fatalf("heal_share = %d, %v", n, err)
	}
	if err := h.AbortHeal(ctx, sale.ID, "2:b"); err == nil {
		t.Errorf("AbortHeal after a bucket got its share: no error; want the sale left healing")
	}
	if st, err := h.SaleState(ctx, sale.ID); err != nil || !st.Healing {
		t.Errorf("SaleState after the refused abort = %+v, %v; want healing", st, err)
	}
	for b := range 3 {
		if err := claim(b, fmt.Sprintf("b%d", b)); !errors.Is(err, ErrHealing) {
			t.Errorf("a claim in bucket %d after the refused abort: %v; want ErrHealing", b, err)
		}
	}
	// The next heal (another node's, once this one is stale) finishes.
	if _, err := h.BeginHeal(ctx, sale, "3:c"); err != nil {
		t.Fatal(err)
	}
	row := *sale
	row.Unsold = 27
	if _, _, err := h.ApplyHeal(ctx, &row, "3:c", nil, nil); err != nil {
		t.Fatal(err)
	}
	wantLevel(t, s, sale.ID, 30, 3)
	for b := range 3 {
		if err := claim(b, fmt.Sprintf("c%d", b)); err != nil {
			t.Errorf("a claim in bucket %d after the next heal: %v", b, err)
		}
	}
}
