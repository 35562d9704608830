package sqlstore

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestOutageIsUnavailable cuts, then blackholes, the network between the
// store and a real MariaDB or PostgreSQL server (the project's TCP proxy)
// and calls every read and write the API and the workers make. Each must
// fail with the domain's EUNAVAILABLE (503 + Retry-After at the API), not
// an internal error, and within its deadline.
func TestOutageIsUnavailable(t *testing.T) {
	for _, d := range dialects[1:] { // SQLite has no network to lose
		t.Run(d.name, func(t *testing.T) {
			u, err := url.Parse(d.url(t))
			if err != nil {
				t.Fatal(err)
			}
			proxy := servicetest.StartProxy(t, u.Host)
			u.Host = proxy.Addr()
			db := openDB(t, u.String())
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			sales, orders := NewSaleStore(db), NewOrderStore(db)
			sale := &seckill.Sale{ID: servicetest.UniqueName("out"), Name: "Tea", PriceCents: 100, Stock: 10, PurchaseLimit: 1,
				StartAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour)}
			if err := sales.CreateSale(t.Context(), sale); err != nil {
				t.Fatalf("CreateSale: %v", err)
			}
			resID := seckill.NewReservationID(sale.ID, time.Now())
			calls := map[string]func(ctx context.Context) error{
				"Ping": db.Ping,
				"Sale": func(ctx context.Context) error { _, err := sales.Sale(ctx, sale.ID); return err },
				"CreateSale": func(ctx context.Context) error {
					s := *sale
					s.ID = servicetest.UniqueName("out")
					return sales.CreateSale(ctx, &s)
				},
				"Order":       func(ctx context.Context) error { _, err := orders.Order(ctx, resID); return err },
				"FailedOrder": func(ctx context.Context) error { _, err := orders.FailedOrder(ctx, resID); return err },
				"FailedOrders": func(ctx context.Context) error {
					_, _, err := orders.FailedOrders(ctx, seckill.FailedOrderFilter{Limit: 10})
					return err
				},
				"FailedOrderCounts": func(ctx context.Context) error { _, err := orders.FailedOrderCounts(ctx); return err },
				"PayOrder":          func(ctx context.Context) error { _, err := orders.PayOrder(ctx, resID, time.Now()); return err },
				"RestoreOrder": func(ctx context.Context) error {
					_, _, err := orders.Restores.RestoreOrder(ctx, resID, "test", time.Now())
					return err
				},
				"ParkRestore": func(ctx context.Context) error {
					_, err := orders.Restores.ParkRestore(ctx, resID, sale.ID, "test", time.Now())
					return err
				},
				"RestoreRequests": func(ctx context.Context) error {
					_, err := orders.Restores.RestoreRequests(ctx, seckill.RestoreStateParked, 10)
					return err
				},
				"SaleLedger": func(ctx context.Context) error { _, err := orders.Ledger.SaleLedger(ctx, sale.ID); return err },
			}
			for _, outage := range []struct {
				name        string
				start, heal func()
			}{
				{"cut", proxy.Cut, proxy.Restore},
				{"blackhole", proxy.Blackhole, proxy.Restore},
			} {
				outage.start()
				for name, call := range calls {
					const budget = 500 * time.Millisecond
					ctx, cancel := context.WithTimeout(t.Context(), budget)
					start := time.Now()
					err := call(ctx)
					took := time.Since(start)
					cancel()
					if code := seckill.ErrorCode(err); code != seckill.EUNAVAILABLE {
						t.Errorf("%s, %s: %v (code %q); want code %q", outage.name, name, err, code, seckill.EUNAVAILABLE)
					}
					// The drivers answer a deadline promptly: a hang, not
					// a second of slack, is what this catches.
					servicetest.WantWithin(t, fmt.Sprintf("%s, %s: answered", outage.name, name), took, budget+time.Second)
				}
				outage.heal()
				// Healed: the pool reconnects by itself.
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				for db.Ping(ctx) != nil && ctx.Err() == nil {
				}
				if _, err := sales.Sale(ctx, sale.ID); err != nil {
					t.Fatalf("after the %s healed: Sale: %v", outage.name, err)
				}
				cancel()
			}
		})
	}
}

func TestClassify(t *testing.T) {
	db := &DB{dialect: sqliteDialect}
	for _, c := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, seckill.EUNAVAILABLE},
		{context.Canceled, seckill.EINTERNAL}, // the caller gave up: not an outage
		{seckill.ErrNotFound, seckill.EINTERNAL},
	} {
		got := db.classify(c.err)
		if code := seckill.ErrorCode(got); code != c.want {
			t.Errorf("classify(%v) = %v (code %s); want code %s", c.err, got, code, c.want)
		}
		if got := db.classify(db.classify(c.err)); seckill.ErrorCode(got) != c.want {
			t.Errorf("classify twice (%v) = %v", c.err, got)
		}
	}
}
