package conformance

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/restore"
)

// ResolverStores are the stores a failed-order resolution touches.
type ResolverStores struct {
	Sales    seckill.SaleStore
	Orders   seckill.OrderStore
	Restores restore.Store
	Resolver seckill.FailedOrderResolver
}

// FailedOrderResolver runs the conformance suite of
// seckill.FailedOrderResolver. newStores is called once per subtest; the
// stores may share a database (every subtest makes sales of its own).
func FailedOrderResolver(t *testing.T, newStores func(t *testing.T) ResolverStores) {
	t.Run("RedriveMakesTheOrder", func(t *testing.T) { testRedrive(t, newStores(t)) })
	t.Run("RedriveRefusedWithoutStock", func(t *testing.T) { testRedriveNoStock(t, newStores(t)) })
	t.Run("RedriveRefusedOverLimit", func(t *testing.T) { testRedriveOverLimit(t, newStores(t)) })
	t.Run("RedriveRefusedAfterRestore", func(t *testing.T) { testRedriveRestored(t, newStores(t)) })
	t.Run("ConcurrentRedrivesNeverOversell", func(t *testing.T) { testRedriveRace(t, newStores(t)) })
	t.Run("ListsByState", func(t *testing.T) { testFailedOrderStates(t, newStores(t)) })
	t.Run("NotFound", func(t *testing.T) {
		st := newStores(t)
		_, _, err := st.Resolver.ResolveFailedOrder(t.Context(), "nosuch.00000000000000000000000000", seckill.ResolveRefunded, "", "ops", time.Now(), time.Minute)
		if !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("resolve of no failed order: %v, want ErrNotFound", err)
		}
	})
}

// failedOf records a failed order of one event of qty for user.
func failedOf(t *testing.T, st ResolverStores, s *seckill.Sale, user string, qty int64) *seckill.FailedOrder {
	t.Helper()
	e := orderEvents(s.ID, time.Now(), qty)[0]
	f := &seckill.FailedOrder{ReservationID: e.ReservationID, SaleID: s.ID, UserID: user, Qty: qty,
		Reason: "insufficient database stock: test", Attempts: 1}
	if err := st.Orders.RecordFailedOrder(t.Context(), f); err != nil {
		t.Fatalf("RecordFailedOrder: %v", err)
	}
	return f
}

func resolverSale(t *testing.T, st ResolverStores, stock, limit int64) *seckill.Sale {
	t.Helper()
	s := newSale()
	s.Stock, s.PurchaseLimit, s.PriceCents = stock, limit, 250
	s.StartAt, s.EndAt = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if err := st.Sales.CreateSale(t.Context(), s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return s
}

func wantRefusal(t *testing.T, err error, reason string) {
	t.Helper()
	if seckill.ErrorCode(err) != seckill.ESTATECONFLICT || !strings.Contains(seckill.ErrorMessage(err), reason) {
		t.Errorf("got %v, want %s saying %q", err, seckill.ESTATECONFLICT, reason)
	}
}

func testRedrive(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 10, 2)
	f := failedOf(t, st, s, "buyer-1", 2)
	now := time.Now()
	r, changed, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "support ticket 7", "ops-eve", now, 15*time.Minute)
	if err != nil || !changed {
		t.Fatalf("redrive: changed %v, %v", changed, err)
	}
	if r.OrderID != seckill.OrderIDOf(f.ReservationID) || r.Actor != "ops-eve" || r.Note != "support ticket 7" {
		t.Errorf("resolution = %+v", r)
	}
	o, err := st.Orders.Order(ctx, f.ReservationID)
	if err != nil {
		t.Fatalf("order after redrive: %v", err)
	}
	if o.Status != seckill.OrderPlaced || o.Qty != 2 || o.UserID != "buyer-1" || o.AmountCents != 500 {
		t.Errorf("order = %+v, want 2 units ordered by buyer-1 for 500", o)
	}
	if !o.PayBy.After(now.Add(14 * time.Minute)) {
		t.Errorf("pay by %v, want about 15 minutes after %v", o.PayBy, now)
	}
	got, _ := st.Sales.Sale(ctx, s.ID)
	if got.Unsold != 8 || got.Version <= s.Version {
		t.Errorf("sale after redrive: unsold %d version %d, want 8 and above %d", got.Unsold, got.Version, s.Version)
	}
	stored, err := st.Orders.FailedOrder(ctx, f.ReservationID)
	if err != nil || stored.Resolution == nil || stored.Resolution.Action != seckill.ResolveRedrive {
		t.Fatalf("failed order after redrive: %+v, %v; want its resolution", stored, err)
	}
	// Idempotent: the same answer, nothing taken twice.
	again, changed, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "retry", "ops-eve", now.Add(time.Second), 15*time.Minute)
	if err != nil || changed || again.Note != "support ticket 7" {
		t.Errorf("second redrive: %+v changed %v, %v; want the first resolution, unchanged", again, changed, err)
	}
	if got, _ := st.Sales.Sale(ctx, s.ID); got.Unsold != 8 {
		t.Errorf("after a second redrive, unsold = %d, want 8", got.Unsold)
	}
	_, _, err = st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRefunded, "", "ops", now, time.Minute)
	wantRefusal(t, err, seckill.RedriveResolved)
}

func testRedriveNoStock(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 1, 5)
	persist(t, st.Orders, s.ID, orderEvents(s.ID, time.Now(), 1), time.Now())
	f := failedOf(t, st, s, "buyer-2", 1)
	_, _, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute)
	wantRefusal(t, err, seckill.RedriveNoStock)
	if _, err := st.Orders.Order(ctx, f.ReservationID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("refused redrive made an order: %v", err)
	}
	if stored, _ := st.Orders.FailedOrder(ctx, f.ReservationID); stored.Resolution != nil {
		t.Errorf("refused redrive resolved the row: %+v", stored.Resolution)
	}
	// Refunded closes it, once.
	r, changed, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRefunded, "refunded by support", "ops-fay", time.Now(), time.Minute)
	if err != nil || !changed || r.Action != seckill.ResolveRefunded || r.OrderID != "" {
		t.Fatalf("refunded: %+v changed %v, %v", r, changed, err)
	}
	if _, changed, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRefunded, "again", "ops-fay", time.Now(), time.Minute); err != nil || changed {
		t.Errorf("second refunded: changed %v, %v; want unchanged", changed, err)
	}
	_, _, err = st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute)
	wantRefusal(t, err, seckill.RedriveResolved)
	if got, _ := st.Sales.Sale(ctx, s.ID); got.Unsold != 0 {
		t.Errorf("unsold = %d, want 0", got.Unsold)
	}
}

func testRedriveOverLimit(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 10, 1)
	e := orderEvents(s.ID, time.Now(), 1)
	e[0].UserID = "buyer-3"
	persist(t, st.Orders, s.ID, e, time.Now())
	f := failedOf(t, st, s, "buyer-3", 1)
	_, _, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute)
	wantRefusal(t, err, seckill.RedriveLimitReached)
	// Once the first order is cancelled, the limit has room again.
	if _, _, err := st.Orders.CancelOrder(ctx, e[0].ReservationID, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute); err != nil || !changed {
		t.Errorf("redrive after the cancel: changed %v, %v", changed, err)
	}
}

func testRedriveRestored(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 10, 5)
	f := failedOf(t, st, s, "buyer-4", 1)
	if _, _, err := st.Restores.RestoreOrder(ctx, f.ReservationID, "operator", time.Now()); err != nil {
		t.Fatalf("RestoreOrder of a failed order: %v", err)
	}
	_, _, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute)
	wantRefusal(t, err, seckill.RedriveRestored)
}

func testRedriveRace(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 3, 10)
	var failed []*seckill.FailedOrder
	for range 8 {
		failed = append(failed, failedOf(t, st, s, "buyer-5", 1))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		won     int
		refused int
	)
	for _, f := range failed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRedrive, "", "ops", time.Now(), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case strings.Contains(seckill.ErrorMessage(err), seckill.RedriveNoStock):
				refused++
			default:
				t.Errorf("redrive: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 3 || refused != 5 {
		t.Errorf("8 redrives for 3 units: %d won, %d refused; want 3 and 5", won, refused)
	}
	if got, _ := st.Sales.Sale(ctx, s.ID); got.Unsold != 0 {
		t.Errorf("unsold = %d, want 0", got.Unsold)
	}
}
