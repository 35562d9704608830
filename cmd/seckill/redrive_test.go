package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestRedriveRaisesNoFalseAlarm: re-driving a failed order that Redis
// never counted (a claim the database refused and a heal released, here
// one recorded straight into the database) takes its unit in Redis too, so
// the heal watcher, running every 200 ms, sees no loss: no heal of the
// sale and no ALERT naming it, while a control sale that really lost
// writes (orders put in the database behind Redis's back, after the
// re-drive) is healed twice, proving the watcher looked meanwhile.
func TestRedriveRaisesNoFalseAlarm(t *testing.T) {
	srv := redistest.StartServer(t)
	e, logs := healingEngine(t, "redis://"+srv.Addr, "none")
	sale, control := e.liveSale(3, 1), e.liveSale(10, 1)
	ctx := context.Background()
	id := seckill.NewReservationID(sale, time.Now())
	if err := e.m.orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: id, SaleID: sale, UserID: "unlucky", Qty: 1,
		Reason: "insufficient_stock (test)", Attempts: 5, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if r := e.admin("POST", "/admin/v1/failed-orders/"+id+"/resolve", map[string]any{"action": "redrive"}); r.status != 200 {
		t.Fatalf("re-drive: %d %v", r.status, r.body)
	}
	if lvl := e.stock(sale); lvl.Reserved != 1 {
		t.Fatalf("Redis reserved %d after the re-drive; want 1 (it took the unit)", lvl.Reserved)
	}
	if held, err := e.m.stock.StockStore().Held(ctx, sale, "unlucky"); err != nil || held != 1 {
		t.Fatalf("Redis counts unlucky holding %d, %v; want 1", held, err)
	}
	for want := int64(1); want <= 2; want++ {
		ev := seckill.ReservationEvent{ReservationID: seckill.NewReservationID(control, time.Now()), SaleID: control,
			UserID: servicetest.UniqueName("behind"), Qty: 1, ReservedAt: time.Now()}
		if _, err := e.m.orders.PersistReservations(ctx, control, []seckill.ReservationEvent{ev}, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		servicetest.WaitFor(t, 60*time.Second, "the control sale's heal", func() bool { return e.stock(control).Heals >= want })
	}
	if lvl := e.stock(sale); lvl.Heals != 0 || lvl.Reserved != 1 {
		t.Errorf("the re-driven sale: %d heals, reserved %d; want none, 1", lvl.Heals, lvl.Reserved)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ALERT") && strings.Contains(line, sale) {
			t.Errorf("an alert about the re-driven sale: %s", line)
		}
	}
}
