package guarded

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/breaker"
)

// down is a backend that is down: every call is an outage, counted.
type down struct{ calls int }

func (d *down) err() error { d.calls++; return seckill.Errorf(seckill.EUNAVAILABLE, "down") }

func (d *down) Reserve(context.Context, string, []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return nil, d.err()
}
func (d *down) Stock(context.Context, string) (seckill.StockLevel, error) {
	return seckill.StockLevel{}, d.err()
}
func (d *down) Allow(context.Context, string, seckill.RateLimit) (seckill.RateResult, error) {
	return seckill.RateResult{}, d.err()
}
func (d *down) Reservation(context.Context, string) (string, int64, string, error) {
	return "", 0, "", d.err()
}
func (d *down) Preheat(context.Context, *seckill.Sale) (bool, error)  { return false, d.err() }
func (d *down) Sale(context.Context, string) (*seckill.Sale, error)   { return nil, d.err() }
func (d *down) CreateSale(context.Context, *seckill.Sale) error       { return d.err() }
func (d *down) Order(context.Context, string) (*seckill.Order, error) { return nil, d.err() }
func (d *down) FailedOrder(context.Context, string) (*seckill.FailedOrder, error) {
	return nil, d.err()
}
func (d *down) FailedOrders(context.Context, seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error) {
	return nil, "", d.err()
}
func (d *down) FailedOrderCounts(context.Context) ([]seckill.FailedOrderCount, error) {
	return nil, d.err()
}
func (d *down) PayOrder(context.Context, string, time.Time) (*seckill.Order, error) {
	return nil, d.err()
}

// TestEveryCallGoesThroughTheBreaker: once the breaker is open, no call
// of the request paths reaches the backend; each is refused unavailable.
func TestEveryCallGoesThroughTheBreaker(t *testing.T) {
	ctx := context.Background()
	d := &down{}
	b := breaker.New(breaker.Config{Name: "test", Threshold: 1, OpenFor: time.Hour})
	stock, limiter, sales, orders := Stock{Store: d, B: b}, Limiter{Limiter: d, B: b}, Sales{SaleStore: d, B: b}, Orders{OrderStore: d, B: b}
	if _, err := stock.Stock(ctx, "s"); seckill.ErrorCode(err) != seckill.EUNAVAILABLE || d.calls != 1 {
		t.Fatalf("first call: %v after %d backend calls; want the outage, 1 call", err, d.calls)
	}
	calls := map[string]func() error{
		"Reserve":           func() error { _, err := stock.Reserve(ctx, "s", nil); return err },
		"Stock":             func() error { _, err := stock.Stock(ctx, "s"); return err },
		"Allow":             func() error { _, err := limiter.Allow(ctx, "k", seckill.RateLimit{}); return err },
		"Reservation":       func() error { _, _, _, err := stock.Reservation(ctx, "r"); return err },
		"Preheat":           func() error { _, err := stock.Preheat(ctx, &seckill.Sale{}); return err },
		"Sale":              func() error { _, err := sales.Sale(ctx, "s"); return err },
		"CreateSale":        func() error { return sales.CreateSale(ctx, &seckill.Sale{}) },
		"Order":             func() error { _, err := orders.Order(ctx, "r"); return err },
		"FailedOrder":       func() error { _, err := orders.FailedOrder(ctx, "r"); return err },
		"FailedOrders":      func() error { _, _, err := orders.FailedOrders(ctx, seckill.FailedOrderFilter{}); return err },
		"FailedOrderCounts": func() error { _, err := orders.FailedOrderCounts(ctx); return err },
		"PayOrder":          func() error { _, err := orders.PayOrder(ctx, "r", time.Now()); return err },
	}
	for name, call := range calls {
		if err := call(); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
			t.Errorf("%s with the breaker open: %v, want unavailable", name, err)
		}
	}
	if d.calls != 1 {
		t.Errorf("the backend saw %d calls, want only the first: every call must go through the breaker", d.calls)
	}
}
