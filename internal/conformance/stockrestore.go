package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/restore"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// RestoringStockStore is a stock store that can also restore reservations
// and show its ledger, as the Redis stock store does. It is an alias, so
// constructors may spell the interface out.
type RestoringStockStore = interface {
	seckill.StockStore
	restore.Stock
	reconcile.StockLedger
}

// restockPatience is how long a restock announcement may take to arrive.
const restockPatience = 5 * time.Second

// StockRestorer exercises the restore.Stock and reconcile.StockLedger
// sides of a stock store. newStore is called once per subtest and must
// return a store whose sales and restock announcements no other test sees
// (announcements of other sales are tolerated); it should register its own
// cleanup. Subtests run in parallel.
func StockRestorer(t *testing.T, newStore func(t *testing.T) RestoringStockStore, opts ...Option) {
	t.Helper()
	o := options(opts)

	t.Run("RestoreGivesUnitsBackToStockAndLimit", func(t *testing.T) {
		t.Parallel()
		o.skipIfUnordered(t)
		store := newStore(t)
		sale := preheatedSale(t, store, 2, 1)
		r1, r2 := stockRequest(sale.ID, "u1", 1, ""), stockRequest(sale.ID, "u2", 1, "")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, r1, r2), seckill.OutcomeReserved, seckill.OutcomeReserved)
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u1", 1, ""), stockRequest(sale.ID, "u3", 1, "")),
			seckill.OutcomeLimitExceeded, seckill.OutcomeSoldOut)

		wantRestore(t, store, r1.ReservationID, true)
		wantStockLevel(t, store, sale.ID, 2, 1)
		// The unit is u1's to buy again (the limit is free), and then sold out again.
		again := stockRequest(sale.ID, "u1", 1, "")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, again, stockRequest(sale.ID, "u3", 1, "")),
			seckill.OutcomeReserved, seckill.OutcomeSoldOut)
		wantStockLevel(t, store, sale.ID, 2, 2)

		// Restored to a sold-out sale, the unit goes to whoever asks first.
		wantRestore(t, store, again.ReservationID, true)
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, stockRequest(sale.ID, "u3", 1, ""), stockRequest(sale.ID, "u4", 1, "")),
			seckill.OutcomeReserved, seckill.OutcomeSoldOut)
		wantStockLevel(t, store, sale.ID, 2, 2)
	})

	t.Run("RestoreReservationsMatchesOneByOne", func(t *testing.T) { testRestoreReservationsMatchesOneByOne(t, newStore) })

	onLiveSale(t, "RestoreFreesOnlyItsOwnUnits", newStore, 10, 3, func(t *testing.T, store RestoringStockStore, sale *seckill.Sale) {
		a, b := stockRequest(sale.ID, "u1", 2, ""), stockRequest(sale.ID, "u1", 1, "")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, a, b), seckill.OutcomeReserved, seckill.OutcomeReserved)
		wantRestore(t, store, a.ReservationID, true)
		wantStockLevel(t, store, sale.ID, 10, 1)
		// u1 still holds b's unit: 2 more fit the limit of 3, 3 do not.
		wantReserve(t, store, sale.ID, "u1", 3, "", seckill.OutcomeLimitExceeded)
		wantReserve(t, store, sale.ID, "u1", 2, "", seckill.OutcomeReserved)
		wantStockLevel(t, store, sale.ID, 10, 3)
	})

	onLiveSale(t, "SecondRestoreChangesNothing", newStore, 10, 5, func(t *testing.T, store RestoringStockStore, sale *seckill.Sale) {
		r, other := stockRequest(sale.ID, "u1", 2, ""), stockRequest(sale.ID, "u1", 1, "")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, r, other), seckill.OutcomeReserved, seckill.OutcomeReserved)
		wantRestore(t, store, r.ReservationID, true)
		before := restoreRecords(t, store, sale.ID)
		wantRestore(t, store, r.ReservationID, false)
		wantRestore(t, store, r.ReservationID, false)
		wantStockLevel(t, store, sale.ID, 10, 1)
		if after := restoreRecords(t, store, sale.ID); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("records after a second restore = %+v; want unchanged %+v", after, before)
		}
		// u1 holds other's unit only: 4 more fit the limit of 5, 5 do not.
		wantReserve(t, store, sale.ID, "u1", 5, "", seckill.OutcomeLimitExceeded)
		wantReserve(t, store, sale.ID, "u1", 4, "", seckill.OutcomeReserved)
	})

	onLiveSale(t, "ConcurrentRestoresRestoreOnce", newStore, 10, 5, func(t *testing.T, store RestoringStockStore, sale *seckill.Sale) {
		r, keep := stockRequest(sale.ID, "u1", 2, ""), stockRequest(sale.ID, "u2", 3, "")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, r, keep), seckill.OutcomeReserved, seckill.OutcomeReserved)
		const restorers = 20
		var (
			mu      sync.Mutex
			answers = map[bool]int{}
		)
		atOnce(restorers, func(int) {
			restored, err := store.RestoreReservation(context.Background(), r.ReservationID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("RestoreReservation: %v", err)
				return
			}
			answers[restored]++
		})
		if answers[true] != 1 || answers[false] != restorers-1 {
			t.Fatalf("%d concurrent restores of one reservation: %d restored, %d already restored; want 1 and %d",
				restorers, answers[true], answers[false], restorers-1)
		}
		wantStockLevel(t, store, sale.ID, 10, 3)
		// u1's limit got back exactly 2 units: 5 fit again, 6 would not.
		wantReserve(t, store, sale.ID, "u1", 6, "", seckill.OutcomeLimitExceeded)
		wantReserve(t, store, sale.ID, "u1", 5, "", seckill.OutcomeReserved)
	})

	onLiveSale(t, "ReplayedKeyKeepsTheRestoredReservation", newStore, 10, 2, func(t *testing.T, store RestoringStockStore, sale *seckill.Sale) {
		first := stockRequest(sale.ID, "u1", 2, "k")
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, first), seckill.OutcomeReserved)
		wantRestore(t, store, first.ReservationID, true)
		// The old key answers with the old reservation and takes nothing.
		wantReplay(t, store, sale.ID, first, "replay after restore")
		wantStockLevel(t, store, sale.ID, 10, 0)
		// A new key claims anew, up to the whole limit.
		wantReserve(t, store, sale.ID, "u1", 2, "k2", seckill.OutcomeReserved)
		wantStockLevel(t, store, sale.ID, 10, 2)
	})

	t.Run("RestoreOfUnknownIsNotFound", func(t *testing.T) {
		t.Parallel()
		ctx, store := context.Background(), newStore(t)
		sale := preheatedSale(t, store, 1, 1)
		rejected := stockRequest(sale.ID, "u2", 1, "")
		// Two calls, not one batch: a store that splits a sale over buckets
		// decides one batch's buyers in no order between them.
		wantReserve(t, store, sale.ID, "u1", 1, "", seckill.OutcomeReserved)
		wantStockOutcomes(t, stockReserve(t, store, sale.ID, rejected), seckill.OutcomeSoldOut)
		for _, id := range []string{
			seckill.NewReservationID(sale.ID, time.Now()),                         // never proposed
			rejected.ReservationID,                                                // proposed, not reserved
			seckill.NewReservationID(servicetest.UniqueName("sale_"), time.Now()), // of a sale never loaded
			"", "x", sale.ID, sale.ID + ".", sale.ID + ".0123456789", // malformed
			sale.ID + ".ILOU0123456789ABCDEFGHJKMN", // letters outside the alphabet
			"a{b}.0123456789ABCDEFGHJKMNPQ",         // a sale id that would move the hash tag
		} {
			if restored, err := store.RestoreReservation(ctx, id); !errors.Is(err, seckill.ErrNotFound) || restored {
				t.Errorf("RestoreReservation(%q) = %v, %v; want false, ErrNotFound", id, restored, err)
			}
		}
		wantStockLevel(t, store, sale.ID, 1, 1)
	})

	t.Run("Reservations", func(t *testing.T) {
		t.Parallel()
		ctx, store := context.Background(), newStore(t)
		// Over a thousand records, so a store that pages through them
		// must turn pages.
		const n = 1100
		sale := preheatedSale(t, store, 2*n, 2)
		if got, err := store.Reservations(ctx, sale.ID); err != nil || len(got) != 0 {
			t.Fatalf("Reservations of a sale without any = %+v, %v; want none", got, err)
		}
		before := time.Now().Add(-time.Second)
		want := map[string]seckill.ReservationRecord{}
		var reqs []seckill.ReserveRequest
		for i := range n {
			qty := int64(1 + i%2)
			reqs = append(reqs, stockRequest(sale.ID, fmt.Sprintf("user:%d", i), qty, ""))
		}
		for chunk := range slices.Chunk(reqs, 500) {
			for _, r := range stockReserve(t, store, sale.ID, chunk...) {
				if r.Outcome != seckill.OutcomeReserved {
					t.Fatalf("Reserve = %+v; want reserved", r)
				}
			}
		}
		after := time.Now().Add(time.Second)
		for i, r := range reqs {
			want[r.ReservationID] = seckill.ReservationRecord{ReservationID: r.ReservationID, UserID: r.UserID, Qty: r.Qty}
			if i%7 == 0 {
				wantRestore(t, store, r.ReservationID, true)
				rec := want[r.ReservationID]
				rec.Restored = true
				want[r.ReservationID] = rec
			}
		}
		got := restoreRecords(t, store, sale.ID)
		if len(got) != n {
			t.Fatalf("Reservations listed %d records; want %d", len(got), n)
		}
		seen := map[string]bool{}
		for _, g := range got {
			w, ok := want[g.ReservationID]
			switch {
			case !ok:
				t.Fatalf("Reservations listed %+v, which is no reservation of this sale", g)
			case seen[g.ReservationID]:
				t.Fatalf("Reservations listed %s twice", g.ReservationID)
			case g.UserID != w.UserID || g.Qty != w.Qty || g.Restored != w.Restored:
				t.Fatalf("Reservations listed %+v; want %+v", g, w)
			case g.ReservedAt.Before(before) || g.ReservedAt.After(after):
				t.Fatalf("record %s: ReservedAt = %s; want between %s and %s", g.ReservationID, g.ReservedAt, before, after)
			}
			seen[g.ReservationID] = true
		}

		// In pages: every record once, whatever the page size.
		for _, count := range []int{7, 1000} {
			paged := map[string]seckill.ReservationRecord{}
			err := store.ScanReservations(ctx, sale.ID, count, func(page []seckill.ReservationRecord) error {
				for _, r := range page {
					if _, dup := paged[r.ReservationID]; dup {
						t.Fatalf("ScanReservations(count %d) gave %s twice", count, r.ReservationID)
					}
					paged[r.ReservationID] = r
				}
				return nil
			})
			if err != nil || len(paged) != n {
				t.Fatalf("ScanReservations(count %d) = %d records, %v; want %d", count, len(paged), err, n)
			}
			for _, g := range got {
				if paged[g.ReservationID] != g {
					t.Fatalf("ScanReservations(count %d): %+v; want %+v", count, paged[g.ReservationID], g)
				}
			}
		}
		// By id: those it has, and nothing for an id it has not.
		ids := []string{reqs[0].ReservationID, reqs[1].ReservationID, seckill.NewReservationID(sale.ID, time.Now()), reqs[n-1].ReservationID}
		of, err := store.ReservationsOf(ctx, sale.ID, ids)
		if err != nil || len(of) != 3 {
			t.Fatalf("ReservationsOf = %d records, %v; want 3", len(of), err)
		}
		for _, g := range got {
			if r, ok := of[g.ReservationID]; ok && r != g {
				t.Fatalf("ReservationsOf: %+v; want %+v", r, g)
			}
		}
	})

	t.Run("RestockedRoundTrip", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		saleID := servicetest.UniqueName("sale_")
		// Two subscribers, as two API nodes: both hear the announcement.
		var heard [2]chan string
		for i := range heard {
			heard[i] = make(chan string, 100)
			ch := heard[i]
			runUntilStopped(t, "SubscribeRestocked", func(ctx context.Context) error {
				return store.SubscribeRestocked(ctx, func(id string) {
					select {
					case ch <- id:
					default:
					}
				})
			})
		}
		// A subscription is made asynchronously, so announce until heard.
		deadline := time.After(restockPatience)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range heard {
		wait:
			for {
				select {
				case id := <-heard[i]:
					if id == saleID {
						break wait
					}
				case <-tick.C:
					if err := store.PublishRestocked(context.Background(), saleID); err != nil {
						t.Fatalf("PublishRestocked: %v", err)
					}
				case <-deadline:
					t.Fatalf("subscriber %d did not hear the restock of %s within %s", i, saleID, restockPatience)
				}
			}
		}
	})

	t.Run("SubscribeReturnsWhenCancelled", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- store.SubscribeRestocked(ctx, func(string) {}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("SubscribeRestocked with a cancelled context = %v; want nil", err)
			}
		case <-time.After(restockPatience):
			t.Fatalf("SubscribeRestocked with a cancelled context still running after %s", restockPatience)
		}
	})

	t.Run("PublishRestockedOfInvalidSale", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		wantCode(t, "PublishRestocked(a{b})", store.PublishRestocked(context.Background(), "a{b}"), seckill.EINVALID)
	})
}

func wantRestore(t *testing.T, store restore.Stock, reservationID string, want bool) {
	t.Helper()
	restored, err := store.RestoreReservation(context.Background(), reservationID)
	if err != nil || restored != want {
		t.Fatalf("RestoreReservation(%s) = %v, %v; want %v, nil", reservationID, restored, err, want)
	}
}

func restoreRecords(t *testing.T, store reconcile.StockLedger, saleID string) []seckill.ReservationRecord {
	t.Helper()
	recs, err := store.Reservations(context.Background(), saleID)
	if err != nil {
		t.Fatalf("Reservations: %v", err)
	}
	return recs
}
