package soldout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// lookup is Config.Replays over a stockReserver: it reads the keys the
// store recorded and reserves nothing, as the Redis HMGET does.
type lookup struct {
	s      *stockReserver
	calls  atomic.Int64
	err    error
	during func() // called on entry when set
}

func (l *lookup) Reserve(_ context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	l.calls.Add(1)
	if l.during != nil {
		l.during()
	}
	if l.err != nil {
		return seckill.ReserveResult{}, l.err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if id, ok := l.s.byKey[req.UserID+"/"+req.IdempotencyKey]; ok {
		if l.s.qtyOf[id] != req.Qty {
			return seckill.ReserveResult{Outcome: seckill.OutcomeKeyReused}, nil
		}
		return seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: id, Qty: req.Qty}, nil
	}
	return seckill.ReserveResult{}, nil
}

func keyed(saleID, key string, qty int64) seckill.ReserveRequest {
	return seckill.ReserveRequest{ReservationID: seckill.NewReservationID(saleID, time.Now()), UserID: "u", Qty: qty, IdempotencyKey: key}
}

// TestKeyedRequestsAnsweredLocally: on a flagged sale a retry gets its
// reservation back from the lookup, a new key gets sold out, a reused key
// with another qty gets key reused; none of them reaches the stock store.
func TestKeyedRequestsAnsweredLocally(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 1})
	l := &lookup{s: stock}
	g := New(stock, Config{Now: newClock().Now, Replays: l})
	ctx := context.Background()
	first, err := g.Reserve(ctx, "tea", keyed("tea", "k1", 1))
	if err != nil || first.Outcome != seckill.OutcomeReserved {
		t.Fatalf("first = %+v, %v", first, err)
	}
	if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeSoldOut || !g.SoldOut("tea") {
		t.Fatalf("second: %s, flagged %v; want sold out and flagged", o, g.SoldOut("tea"))
	}
	calls := stock.count("tea")
	retry, err := g.Reserve(ctx, "tea", keyed("tea", "k1", 1))
	if err != nil || retry.Outcome != seckill.OutcomeReplayed || retry.ReservationID != first.ReservationID {
		t.Fatalf("retry = %+v, %v; want a replay of %s", retry, err, first.ReservationID)
	}
	if o := reserve(t, g, "tea", 2, "k1"); o != seckill.OutcomeKeyReused {
		t.Fatalf("same key, other qty: %s; want key reused", o)
	}
	if o := reserve(t, g, "tea", 1, "k2"); o != seckill.OutcomeSoldOut {
		t.Fatalf("new key: %s; want sold out", o)
	}
	if stock.count("tea") != calls {
		t.Fatalf("stock calls went from %d to %d; want none for a flagged sale", calls, stock.count("tea"))
	}
	if g.Hits() != 1 || g.ReplayHits() != 2 || l.calls.Load() != 3 {
		t.Fatalf("hits %d, replay hits %d, lookups %d; want 1, 2, 3", g.Hits(), g.ReplayHits(), l.calls.Load())
	}
}

// TestLookupFailureGoesToTheStore: a failed lookup is no answer: the
// stock store decides, as it did before lookups existed.
func TestLookupFailureGoesToTheStore(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 1})
	g := New(stock, Config{Now: newClock().Now, Replays: &lookup{s: stock, err: errors.New("redis down")}})
	first, _ := g.Reserve(context.Background(), "tea", keyed("tea", "k1", 1))
	reserve(t, g, "tea", 1, "")
	calls := stock.count("tea")
	retry, err := g.Reserve(context.Background(), "tea", keyed("tea", "k1", 1))
	if err != nil || retry.ReservationID != first.ReservationID || stock.count("tea") != calls+1 {
		t.Fatalf("retry = %+v, %v after %d store calls; want %+v from the store", retry, err, stock.count("tea")-calls, first)
	}
}

// TestClearDuringLookup: units restored while the lookup ran may be for
// this buyer: the stock store decides, and reserves them.
func TestClearDuringLookup(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 0})
	l := &lookup{s: stock}
	g := New(stock, Config{Now: newClock().Now, Replays: l})
	reserve(t, g, "tea", 1, "")
	l.during = func() {
		stock.restore("tea", 1)
		g.Clear("tea")
	}
	if o := reserve(t, g, "tea", 1, "k1"); o != seckill.OutcomeReserved {
		t.Fatalf("keyed request after a restore during its lookup: %s; want reserved", o)
	}
}

// TestLocalAnswersMatchTheStore: random keyed and keyless requests, some
// retried, with restores in between, give exactly the same outcomes and
// reservation ids through a gate with the lookup as through one without
// it (where every keyed request went to the stock store).
func TestLocalAnswersMatchTheStore(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		withStock, plainStock := newStock(map[string]int64{"tea": 5}), newStock(map[string]int64{"tea": 5})
		clk := newClock()
		with := New(withStock, Config{Now: clk.Now, Replays: &lookup{s: withStock}})
		plain := New(plainStock, Config{Now: clk.Now})
		var sent []seckill.ReserveRequest
		for i := range 300 {
			var req seckill.ReserveRequest
			switch r := rng.IntN(10); {
			case r < 3 && len(sent) > 0:
				req = sent[rng.IntN(len(sent))]
				if rng.IntN(4) == 0 {
					req.Qty = 3 - req.Qty // a reused key with another qty
				}
			case r < 7:
				req = keyed("tea", fmt.Sprintf("k%d", i), int64(1+rng.IntN(2)))
			default:
				req = keyed("tea", "", 1)
			}
			sent = append(sent, req)
			if rng.IntN(25) == 0 {
				withStock.restore("tea", 1)
				plainStock.restore("tea", 1)
				with.Clear("tea")
				plain.Clear("tea")
			}
			a, errA := with.Reserve(context.Background(), "tea", req)
			b, errB := plain.Reserve(context.Background(), "tea", req)
			if a != b || errA != nil || errB != nil {
				t.Fatalf("seed %d request %d %+v: with lookup %+v, %v; without %+v, %v", seed, i, req, a, errA, b, errB)
			}
		}
		if with.Hits()+with.ReplayHits() <= plain.Hits() {
			t.Fatalf("seed %d: the lookup answered nothing more locally (%d+%d vs %d)", seed, with.Hits(), with.ReplayHits(), plain.Hits())
		}
	}
}

// TestConcurrentLookups: keyed retries racing on a flagged sale all get
// their own reservation back.
func TestConcurrentLookups(t *testing.T) {
	const buyers = 16
	stock := newStock(map[string]int64{"tea": buyers})
	g := New(stock, Config{Now: newClock().Now, Replays: &lookup{s: stock}})
	firsts := make([]seckill.ReserveResult, buyers)
	for i := range firsts {
		firsts[i], _ = g.Reserve(context.Background(), "tea", keyed("tea", fmt.Sprint("k", i), 1))
	}
	reserve(t, g, "tea", 1, "")
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			for range 50 {
				res, err := g.Reserve(context.Background(), "tea", keyed("tea", fmt.Sprint("k", i), 1))
				if err != nil || res.Outcome != seckill.OutcomeReplayed || res.ReservationID != firsts[i].ReservationID {
					t.Errorf("buyer %d: %+v, %v; want %+v", i, res, err, firsts[i])
					return
				}
			}
		})
	}
	wg.Wait()
}
