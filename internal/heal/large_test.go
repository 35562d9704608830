package heal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// bigDB is a sale of n paid orders that exists only as a rule (order i is
// of reservation "big.<i, 8 digits>"): the memory a heal plan of it takes
// is the plan's own.
type bigDB struct{ n int }

func (bigDB) Sale(context.Context, string) (*seckill.Sale, error) { return nil, nil }

func (d bigDB) OrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.Order, error) {
	first := 0
	if after != "" {
		i, err := strconv.Atoi(strings.TrimPrefix(after, "big."))
		if err != nil {
			return nil, err
		}
		first = i + 1
	}
	var out []*seckill.Order
	for i := first; i < d.n && len(out) < limit; i++ {
		id := fmt.Sprintf("big.%08d", i)
		out = append(out, &seckill.Order{ID: "o-" + id, ReservationID: id, SaleID: "big", UserID: "u" + strconv.Itoa(i), Qty: 1, Status: seckill.OrderPaid})
	}
	return out, nil
}

func (bigDB) FailedOrdersAfter(context.Context, string, string, int) ([]*seckill.FailedOrder, error) {
	return nil, nil
}

// emptyStock is a stock store that forgot everything.
type emptyStock struct{ Stock }

func (emptyStock) ReservationsOf(context.Context, string, []string) (map[string]seckill.ReservationRecord, error) {
	return map[string]seckill.ReservationRecord{}, nil
}

// TestPlanOfAMillionOrdersInBoundedMemory: a heal of a sale whose million
// records Redis lost (its keys vanished) reads and applies one page at a
// time, never the whole ledger.
func TestPlanOfAMillionOrdersInBoundedMemory(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	w := New(emptyStock{}, bigDB{n: n}, loaded{}, Config{})
	var adds, pages, biggest int
	var err error
	peak := servicetest.PeakHeap(func() {
		err = w.plan(context.Background(), "big", "", func(add, release []seckill.ReservationRecord) error {
			adds, pages, biggest = adds+len(add), pages+1, max(biggest, len(add)+len(release))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders: %d pages, peak heap %.1f MB above the start", n, pages, float64(peak)/(1<<20))
	if adds != n || biggest > planPage {
		t.Errorf("plan: %d records to add in pages of up to %d; want %d in pages of up to %d", adds, biggest, n, planPage)
	}
	if peak > 64<<20 {
		t.Errorf("peak heap %.1f MB above the start; want below 64 MB", float64(peak)/(1<<20))
	}
}
