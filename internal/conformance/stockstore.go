// Package conformance holds the shared test suites that every
// implementation of a domain port must pass. An adapter is done when it
// passes its port's suite; the suites speak only domain types.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// Option adjusts a suite to a kind of implementation.
type Option func(*suiteOptions)

type suiteOptions struct{ unordered string }

// UnorderedAcrossBuyers says the store keeps a batch's order only among
// some buyers (a sale split into stock buckets keeps it within each
// bucket): the subtests whose outcome rests on the order of different
// buyers' requests in one batch are skipped, with why.
func UnorderedAcrossBuyers(why string) Option {
	return func(o *suiteOptions) { o.unordered = why }
}

func options(opts []Option) suiteOptions {
	var o suiteOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

func (o suiteOptions) skipIfUnordered(t *testing.T) {
	t.Helper()
	if o.unordered != "" {
		t.Skip("the order of different buyers' requests in one batch is not kept: " + o.unordered)
	}
}

// StockStore exercises a seckill.StockStore. newStore is called once per
// subtest and must return a store whose sales no other test touches (sale
// ids are unique per subtest anyway); it should register its own cleanup.
// Subtests run in parallel. The store's clock is its own (Redis TIME), so
// windows are set hours away from the real present.
func StockStore(t *testing.T, newStore func(t *testing.T) seckill.StockStore, opts ...Option) {
	t.Helper()
	o := options(opts)

	t.Run("PreheatIsIdempotent", func(t *testing.T) {
		t.Parallel()
		ctx, store := context.Background(), newStore(t)
		sale := liveStockSale(10, 3)
		created, err := store.Preheat(ctx, sale)
		if err != nil || !created {
			t.Fatalf("first Preheat = %v, %v; want true, nil", created, err)
		}
		created, err = store.Preheat(ctx, sale)
		if err != nil || created {
			t.Fatalf("second Preheat = %v, %v; want false, nil", created, err)
		}
		wantStockLevel(t, store, sale.ID, 10, 0)
	})

	t.Run("PreheatNeverResetsALiveSale", func(t *testing.T) {
		t.Parallel()
		ctx, store := context.Background(), newStore(t)
		sale := preheatedSale(t, store, 10, 3)
		wantReserve(t, store, sale.ID, "u1", 3, "", seckill.OutcomeReserved)

		again := *sale
		again.Stock, again.PurchaseLimit = 100, 50
		again.StartAt, again.EndAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
		if created, err := store.Preheat(ctx, &again); err != nil || created {
			t.Fatalf("Preheat of a live sale = %v, %v; want false, nil", created, err)
		}
		wantStockLevel(t, store, sale.ID, 10, 3)
		// The old limit and window still hold: u1 is at the limit of 3,
		// and the sale is still open.
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u1", 1, ""), stockRequest(sale.ID, "u2", 1, "")),
			seckill.OutcomeLimitExceeded, seckill.OutcomeReserved)
	})

	t.Run("StockOfUnknownSaleIsNotFound", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		_, err := store.Stock(context.Background(), servicetest.UniqueName("nosale"))
		if !errors.Is(err, seckill.ErrNotFound) {
			t.Fatalf("Stock of a sale never preheated: err = %v; want ErrNotFound", err)
		}
	})

	onLiveSale(t, "Reserved", newStore, 10, 3, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		r := stockRequest(sale.ID, "u1", 2, "")
		got := stockReserve(t, store, sale.ID, r)
		want := seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: 2}
		if got[0] != want {
			t.Fatalf("Reserve = %+v; want %+v", got[0], want)
		}
		wantStockLevel(t, store, sale.ID, 10, 2)
	})

	onLiveSale(t, "ReplayedWithSameKey", newStore, 10, 5, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		first := stockRequest(sale.ID, "u1", 2, "key-1")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, first), seckill.OutcomeReserved)

		wantReplay(t, store, sale.ID, first, "replay")
		wantStockLevel(t, store, sale.ID, 10, 2)

		// The key belongs to u1 alone: u2 may use the same string.
		wantReserve(t, store, sale.ID, "u2", 2, "key-1", seckill.OutcomeReserved)
		wantStockLevel(t, store, sale.ID, 10, 4)
	})

	onLiveSale(t, "ReplayedEvenWhenSoldOutOrAtLimit", newStore, 2, 2, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		first := stockRequest(sale.ID, "u1", 2, "k")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, first), seckill.OutcomeReserved)
		got := stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u1", 2, "k"))
		if got[0].Outcome != seckill.OutcomeReplayed || got[0].ReservationID != first.ReservationID {
			t.Fatalf("replay after sell-out = %+v; want replayed %s", got[0], first.ReservationID)
		}
	})

	onLiveSale(t, "KeyReusedWithOtherQty", newStore, 10, 5, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		wantReserve(t, store, sale.ID, "u1", 1, "k", seckill.OutcomeReserved)
		got := stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u1", 2, "k"))
		if got[0] != (seckill.ReserveResult{Outcome: seckill.OutcomeKeyReused}) {
			t.Fatalf("same key, other qty = %+v; want key reused and nothing else", got[0])
		}
		wantStockLevel(t, store, sale.ID, 10, 1)
	})

	// Runs of one-request batches on a fresh live sale: each request's
	// outcome, then the units reserved.
	for _, tt := range []struct {
		name         string
		stock, limit int64
		steps        []reserveStep
		reserved     int64
	}{
		{"RejectionsAreNotStoredUnderTheKey", 10, 2, []reserveStep{
			{"u1", 3, "k", seckill.OutcomeLimitExceeded}, // qty 3 is over the limit of 2
			// The same key with another qty is a new decision, not key reused.
			{"u1", 1, "k", seckill.OutcomeReserved},
		}, 1},
		{"LimitExceeded", 100, 3, []reserveStep{
			{"u1", 4, "", seckill.OutcomeLimitExceeded}, // qty over the limit at once
			// cumulative: 2 + 1 fit, then 1 more does not, over several calls and keys
			{"u1", 2, "a", seckill.OutcomeReserved},
			{"u1", 1, "b", seckill.OutcomeReserved},
			{"u1", 1, "c", seckill.OutcomeLimitExceeded},
			{"u1", 1, "", seckill.OutcomeLimitExceeded},
			{"u2", 3, "", seckill.OutcomeReserved}, // another buyer is unaffected
		}, 6},
		{"SoldOut", 3, 5, []reserveStep{
			{"u1", 2, "", seckill.OutcomeReserved},
			// 1 unit left: a request for 2 is sold out, one for 1 still fits.
			{"u2", 2, "", seckill.OutcomeSoldOut},
			{"u3", 1, "", seckill.OutcomeReserved},
			{"u4", 1, "", seckill.OutcomeSoldOut},
		}, 3},
	} {
		onLiveSale(t, tt.name, newStore, tt.stock, tt.limit, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
			for _, s := range tt.steps {
				wantReserve(t, store, sale.ID, s.user, s.qty, s.key, s.want)
			}
			wantStockLevel(t, store, sale.ID, tt.stock, tt.reserved)
		})
	}

	for _, tt := range []struct {
		name       string
		start, end time.Duration // from now
		want       seckill.Outcome
	}{
		{"NotStarted", time.Hour, 2 * time.Hour, seckill.OutcomeNotStarted},
		{"Ended", -2 * time.Hour, -time.Hour, seckill.OutcomeEnded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			sale := stockSale(10, 3, time.Now().Add(tt.start), time.Now().Add(tt.end))
			stockPreheat(t, store, sale)
			wantStockOutcomes(t, stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u1", 1, ""), stockRequest(sale.ID, "u2", 1, "k")),
				tt.want, tt.want)
			wantStockLevel(t, store, sale.ID, 10, 0)
		})
	}

	t.Run("NotPreheated", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		saleID := servicetest.UniqueName("sale_")
		wantStockOutcomes(t, stockReserve(t, store, saleID, stockRequest(saleID, "u1", 1, ""), stockRequest(saleID, "u2", 1, "k")),
			seckill.OutcomeNotStarted, seckill.OutcomeNotStarted)
		if _, err := store.Stock(context.Background(), saleID); !errors.Is(err, seckill.ErrNotFound) {
			t.Fatalf("Reserve must not create a sale: Stock err = %v; want ErrNotFound", err)
		}
	})

	t.Run("BatchAnswersInOrder", func(t *testing.T) {
		t.Parallel()
		o.skipIfUnordered(t)
		store := newStore(t)
		sale := preheatedSale(t, store, 5, 2)
		reqs := []seckill.ReserveRequest{
			stockRequest(sale.ID, "u1", 2, "a"), // reserved: 3 left
			stockRequest(sale.ID, "u1", 2, "a"), // replay of the one before, within the batch
			stockRequest(sale.ID, "u1", 1, "a"), // key reused
			stockRequest(sale.ID, "u1", 1, ""),  // u1 is at the limit
			stockRequest(sale.ID, "u2", 2, ""),  // reserved: 1 left
			stockRequest(sale.ID, "u3", 2, ""),  // sold out: only 1 left
			stockRequest(sale.ID, "u3", 3, ""),  // limit exceeded is checked before stock
			stockRequest(sale.ID, "u4", 1, ""),  // reserved: 0 left
			stockRequest(sale.ID, "u5", 1, ""),  // sold out
		}
		got := stockReserve(t, store, sale.ID, reqs...)
		want := []seckill.ReserveResult{
			{Outcome: seckill.OutcomeReserved, ReservationID: reqs[0].ReservationID, Qty: 2},
			{Outcome: seckill.OutcomeReplayed, ReservationID: reqs[0].ReservationID, Qty: 2},
			{Outcome: seckill.OutcomeKeyReused},
			{Outcome: seckill.OutcomeLimitExceeded},
			{Outcome: seckill.OutcomeReserved, ReservationID: reqs[4].ReservationID, Qty: 2},
			{Outcome: seckill.OutcomeSoldOut},
			{Outcome: seckill.OutcomeLimitExceeded},
			{Outcome: seckill.OutcomeReserved, ReservationID: reqs[7].ReservationID, Qty: 1},
			{Outcome: seckill.OutcomeSoldOut},
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("results[%d] = %+v; want %+v", i, got[i], want[i])
			}
		}
		wantStockLevel(t, store, sale.ID, 5, 5)
	})

	onLiveSale(t, "EmptyBatch", newStore, 5, 2, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		if got := stockReserve(t, store, sale.ID); len(got) != 0 {
			t.Fatalf("Reserve of no requests = %+v; want none", got)
		}
	})

	t.Run("StampedeNeverOversells", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		const stock, buyers = 200, 2000
		sale := preheatedSale(t, store, stock, 1)
		outcomes, ids := reserveAtOnce(t, store, sale.ID, buyers, func(i int) seckill.ReserveRequest {
			return stockRequest(sale.ID, fmt.Sprintf("buyer-%d", i), 1, "")
		})
		if outcomes[seckill.OutcomeReserved] != stock || outcomes[seckill.OutcomeSoldOut] != buyers-stock || len(ids) != stock {
			t.Fatalf("%d buyers for %d units: outcomes %v, %d distinct ids; want %d reserved, %d sold out",
				buyers, stock, outcomes, len(ids), stock, buyers-stock)
		}
		wantStockLevel(t, store, sale.ID, stock, stock)
	})

	onLiveSale(t, "ConcurrentRetriesOfOneKeyClaimOnce", newStore, 100, 10, func(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
		// The limit of 10 would let duplicates through: only the key holds them back.
		const retries = 50
		outcomes, ids := reserveAtOnce(t, store, sale.ID, retries, func(int) seckill.ReserveRequest {
			return stockRequest(sale.ID, "impatient", 1, "the-one-key")
		})
		if outcomes[seckill.OutcomeReserved] != 1 || outcomes[seckill.OutcomeReplayed] != retries-1 || len(ids) != 1 {
			t.Fatalf("%d retries of one key: outcomes %v, ids %v; want 1 reserved, %d replayed, one id",
				retries, outcomes, ids, retries-1)
		}
		wantStockLevel(t, store, sale.ID, 100, 1)
	})
}

func stockSale(stock, limit int64, start, end time.Time) *seckill.Sale {
	return &seckill.Sale{
		ID:            servicetest.UniqueName("sale_"),
		Name:          "Tea gift set",
		PriceCents:    1999,
		Stock:         stock,
		PurchaseLimit: limit,
		StartAt:       start,
		EndAt:         end,
		Version:       1,
	}
}

// liveStockSale is open from an hour ago until an hour from now.
func liveStockSale(stock, limit int64) *seckill.Sale {
	return stockSale(stock, limit, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func stockRequest(saleID, user string, qty int64, key string) seckill.ReserveRequest {
	return seckill.ReserveRequest{
		ReservationID:  seckill.NewReservationID(saleID, time.Now()),
		UserID:         user,
		Qty:            qty,
		IdempotencyKey: key,
	}
}

// preheatedSale is a live sale of stock units, limit per buyer, preheated
// into store.
func preheatedSale(t *testing.T, store seckill.StockStore, stock, limit int64) *seckill.Sale {
	t.Helper()
	sale := liveStockSale(stock, limit)
	stockPreheat(t, store, sale)
	return sale
}

// onLiveSale runs test as a parallel subtest named name, on a store of its
// own with a live sale of stock units and a per-buyer limit preheated.
func onLiveSale[S seckill.StockStore](t *testing.T, name string, newStore func(*testing.T) S, stock, limit int64, test func(t *testing.T, store S, sale *seckill.Sale)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		test(t, store, preheatedSale(t, store, stock, limit))
	})
}

// reserveStep is one request of wantReserve and the outcome it must get.
type reserveStep struct {
	user string
	qty  int64
	key  string
	want seckill.Outcome
}

// wantReserve reserves qty for user (with key, if any) alone in a batch
// and checks the outcome.
func wantReserve(t *testing.T, store seckill.StockStore, saleID, user string, qty int64, key string, want seckill.Outcome) {
	t.Helper()
	wantStockOutcomes(t, stockReserve(t, store, saleID, stockRequest(saleID, user, qty, key)), want)
}

// wantReplay sends first again, with a fresh proposed id as a retrying
// client does, and checks that it answers first's reservation.
func wantReplay(t *testing.T, store seckill.StockStore, saleID string, first seckill.ReserveRequest, what string) {
	t.Helper()
	got := stockReserve(t, store, saleID, stockRequest(saleID, first.UserID, first.Qty, first.IdempotencyKey))
	want := seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: first.ReservationID, Qty: first.Qty}
	if got[0] != want {
		t.Fatalf("%s = %+v; want %+v", what, got[0], want)
	}
}

// reserveAtOnce sends n requests of one each, made by req, from n
// goroutines released together, and counts their outcomes and the ids of
// those claimed.
func reserveAtOnce(t *testing.T, store seckill.StockStore, saleID string, n int, req func(i int) seckill.ReserveRequest) (map[seckill.Outcome]int, map[string]bool) {
	t.Helper()
	var (
		mu       sync.Mutex
		outcomes = map[seckill.Outcome]int{}
		ids      = map[string]bool{}
		reqs     = make([]seckill.ReserveRequest, n)
	)
	for i := range n {
		reqs[i] = req(i)
	}
	atOnce(n, func(i int) {
		res, err := store.Reserve(context.Background(), saleID, []seckill.ReserveRequest{reqs[i]})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("Reserve: %v", err)
			return
		}
		outcomes[res[0].Outcome]++
		if res[0].Outcome.Claimed() {
			ids[res[0].ReservationID] = true
		}
	})
	return outcomes, ids
}

func stockPreheat(t *testing.T, store seckill.StockStore, sale *seckill.Sale) {
	t.Helper()
	if created, err := store.Preheat(context.Background(), sale); err != nil || !created {
		t.Fatalf("Preheat(%s) = %v, %v; want true, nil", sale.ID, created, err)
	}
}

func stockReserve(t *testing.T, store seckill.StockStore, saleID string, reqs ...seckill.ReserveRequest) []seckill.ReserveResult {
	t.Helper()
	res, err := store.Reserve(context.Background(), saleID, reqs)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("Reserve answered %d of %d requests: %+v", len(res), len(reqs), res)
	}
	for i, r := range res {
		switch {
		case r.Outcome == seckill.OutcomeReserved && (r.ReservationID != reqs[i].ReservationID || r.Qty != reqs[i].Qty):
			t.Fatalf("results[%d] = %+v; a reservation made now must carry the request's id %s and qty %d",
				i, r, reqs[i].ReservationID, reqs[i].Qty)
		case !r.Outcome.Claimed() && (r.ReservationID != "" || r.Qty != 0):
			t.Fatalf("results[%d] = %+v; a rejection carries no id or qty", i, r)
		}
	}
	return res
}

func wantStockOutcomes(t *testing.T, got []seckill.ReserveResult, want ...seckill.Outcome) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d results %+v; want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Outcome != want[i] {
			t.Errorf("results[%d].Outcome = %s; want %s", i, got[i].Outcome, want[i])
		}
	}
}

func wantStockLevel(t *testing.T, store seckill.StockStore, saleID string, total, reserved int64) {
	t.Helper()
	got, err := store.Stock(context.Background(), saleID)
	if err != nil {
		t.Fatalf("Stock: %v", err)
	}
	if want := (seckill.StockLevel{Total: total, Reserved: reserved}); got != want {
		t.Fatalf("Stock = %+v; want %+v", got, want)
	}
}
