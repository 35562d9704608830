package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// generated is a sale of n reservations that exists only as a rule:
// reservation i is "big.<i, 8 digits>", of user u<i>, qty 1, an order
// paid, and its record active; every read makes its rows up. So the
// memory a reconciliation of it takes is the reconciliation's own.
type generated struct{ n int }

func genID(i int) string { return fmt.Sprintf("big.%08d", i) }

func genIndex(id string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(id, "big."))
	if err != nil {
		return -1
	}
	return i
}

func (g generated) order(i int) *seckill.Order {
	return &seckill.Order{ID: "o-" + genID(i), ReservationID: genID(i), SaleID: "big", UserID: "u" + strconv.Itoa(i), Qty: 1, Status: seckill.OrderPaid}
}

func (g generated) record(i int) seckill.ReservationRecord {
	return seckill.ReservationRecord{ReservationID: genID(i), UserID: "u" + strconv.Itoa(i), Qty: 1, ReservedAt: now.Add(-time.Hour)}
}

func (g generated) LedgerTotals(context.Context, string) (*seckill.LedgerTotals, error) {
	n := int64(g.n)
	return &seckill.LedgerTotals{
		Sale: &seckill.Sale{ID: "big", Stock: n, Unsold: 0, PurchaseLimit: 1},
		Paid: seckill.LedgerCount{Count: n, Units: n},
	}, nil
}

func (g generated) OrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.Order, error) {
	first := 0
	if after != "" {
		first = genIndex(after) + 1
	}
	var out []*seckill.Order
	for i := first; i < g.n && len(out) < limit; i++ {
		out = append(out, g.order(i))
	}
	return out, nil
}

func (generated) FailedOrdersAfter(context.Context, string, string, int) ([]*seckill.FailedOrder, error) {
	return nil, nil
}

func (generated) RestoresAfter(context.Context, string, string, int) ([]*seckill.RestoreRequest, error) {
	return nil, nil
}

func (g generated) LedgerOf(_ context.Context, _ string, ids []string, _ seckill.LedgerParts) (*seckill.SaleLedger, error) {
	l := &seckill.SaleLedger{}
	for _, id := range ids {
		if i := genIndex(id); i >= 0 && i < g.n {
			l.Orders = append(l.Orders, g.order(i))
		}
	}
	return l, nil
}

func (g generated) Stock(context.Context, string) (seckill.StockLevel, error) {
	return seckill.StockLevel{Total: int64(g.n), Reserved: int64(g.n)}, nil
}

func (g generated) Reservations(context.Context, string) ([]seckill.ReservationRecord, error) {
	panic("the whole list of a large sale is never read")
}

func (g generated) ScanReservations(_ context.Context, _ string, count int, fn func([]seckill.ReservationRecord) error) error {
	page := make([]seckill.ReservationRecord, 0, count)
	for i := range g.n {
		page = append(page, g.record(i))
		if len(page) == count || i == g.n-1 {
			if err := fn(page); err != nil {
				return err
			}
			page = page[:0]
		}
	}
	return nil
}

func (g generated) ReservationsOf(_ context.Context, _ string, ids []string) (map[string]seckill.ReservationRecord, error) {
	out := make(map[string]seckill.ReservationRecord, len(ids))
	for _, id := range ids {
		if i := genIndex(id); i >= 0 && i < g.n {
			out[id] = g.record(i)
		}
	}
	return out, nil
}

func (generated) OutboxLen(context.Context, string) (int64, error) { return 0, nil }

// TestMillionReservationsInBoundedMemory: reconciling a sale of a million
// reservations holds pages, not the sale. Holding it whole took about
// 1.2 KB per reservation (1.2 GB); the bound here is 64 MB, and it does
// not depend on n.
func TestMillionReservationsInBoundedMemory(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	g := generated{n: n}
	var r *Report
	peak := servicetest.PeakHeap(func() {
		var err error
		if r, err = Reconcile(context.Background(), "big", g, g, now, Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d reservations: peak heap %.1f MB above the start", n, float64(peak)/(1<<20))
	if !r.OK() || r.StockStore.Active.Count != int64(n) || r.Orders.Paid.Count != int64(n) {
		t.Fatalf("report: OK %v, active %d, paid %d; want OK and %d of each\n%s", r.OK(), r.StockStore.Active.Count, r.Orders.Paid.Count, n, details(r))
	}
	if peak > 64<<20 {
		t.Errorf("peak heap %.1f MB above the start; want below 64 MB", float64(peak)/(1<<20))
	}
}
