package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestEndedSaleIsArchived: a sale that ends loses its idempotency keys at
// once; once its unpaid orders have timed out and been restored, and
// ArchiveAfter has passed, the rest of its Redis keys go, leaving its
// final reconciliation. The database keeps everything: the sale, its
// orders and its reconciliation (from the database alone) still answer.
func TestEndedSaleIsArchived(t *testing.T) {
	clk := &testClock{}
	fast := fastRestores(stacks[0].config(t))
	e := startEngine(t, func(c *Config) {
		fast(c)
		c.ArchiveAfter, c.ArchiveInterval = time.Minute, 50*time.Millisecond
	}, clk.hook())
	ctx := context.Background()
	now := time.Now()
	sale := e.createSale(10, 1, now.Add(-time.Second), now.Add(1500*time.Millisecond))
	winners := map[string]string{}
	var ids []string
	for i := range 5 {
		tok := e.token(fmt.Sprint("buyer-", i))
		r := e.reserve(sale, tok, 1, fmt.Sprint("key-", i))
		if r.status != 202 {
			t.Fatalf("reserve: %d %v", r.status, r.body)
		}
		id := r.body["reservation_id"].(string)
		winners[id] = tok
		ids = append(ids, id)
	}
	e.awaitOrders(winners, time.Minute)
	for _, id := range ids[:2] {
		if r := e.buyer(id, winners[id], "pay"); r.status != 200 {
			t.Fatalf("pay: %d %v", r.status, r.body)
		}
	}
	live, err := e.m.stock.Archive().Footprint(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live sale: %d bytes in Redis for %d reservations (%.0f B each): %v", live.Total, live.Reservations, live.BytesPerReservation(), live.Keys)

	servicetest.WaitFor(t, 30*time.Second, "the idempotency keys to go at the end", func() bool {
		f, err := e.m.stock.Archive().Footprint(ctx, sale)
		return err == nil && f.Keys["idem"] == 0 && f.Keys["res"] > 0
	})
	if _, ok, _ := e.m.stock.Archive().ArchivedSummary(ctx, sale); ok {
		t.Fatal("archived before ArchiveAfter and the payment timeouts")
	}
	// Past the payment deadline and ArchiveAfter: the three unpaid orders
	// are cancelled and restored, and then the sale is archived.
	clk.advance(e.m.Config.PayTimeout + time.Minute)
	servicetest.WaitFor(t, time.Minute, "the sale to be archived", func() bool {
		_, ok, err := e.m.stock.Archive().ArchivedSummary(ctx, sale)
		return err == nil && ok
	})
	// Only the summary is left, at once: the relay, which may read the
	// sale once more before it sees it gone, makes no outbox for a sale
	// that is not loaded.
	after, err := e.m.stock.Archive().Footprint(ctx, sale)
	if err != nil || len(after.Keys) != 1 || after.Keys["archived"] == 0 {
		t.Fatalf("archived sale's keys in Redis = %v, %v; want only the summary", after.Keys, err)
	}
	t.Logf("archived sale: %d bytes in Redis: %v", after.Total, after.Keys)
	if kept, _ := e.m.stock.Archive().KeptSales(ctx); slices.Contains(kept, sale) {
		t.Errorf("the archived sale is still listed as kept")
	}
	// The operator sees it archived, in the sale's view and in the list.
	if r := e.admin("GET", "/admin/v1/sales/"+sale, nil); r.body["phase"] != "archived" {
		t.Errorf("admin view after archiving: phase %v, want archived", r.body["phase"])
	}
	if _, phases := e.listSales("ended", 50); phases[sale] != "archived" {
		t.Errorf("ended list after archiving: phase %q, want archived", phases[sale])
	}
	if r := e.do("GET", "/api/v1/sales/"+sale, "", nil); r.status != 200 || r.body["state"] != "ended" || r.body["remaining"] != float64(8) {
		t.Errorf("sale after archiving: %d %v; want ended with 8 remaining (2 paid of 10)", r.status, r.body)
	}
	for i, id := range ids {
		want := "cancelled"
		if i < 2 {
			want = "paid"
		}
		if r := e.do("GET", "/api/v1/reservations/"+id, winners[id], nil); r.status != 200 || r.body["status"] != want {
			t.Errorf("reservation %d after archiving: %d %v; want %s", i, r.status, r.body, want)
		}
	}
	// Reconciled from the database alone: its 5 claims are 2 orders paid
	// and 3 cancelled, nobody over the limit, nothing oversold.
	report, code := e.reconcileCLI(sale)
	archived, _ := report["archived"].(map[string]any)
	if code != 0 || report["balanced"] != true || archived["claims"] != float64(5) || report["over_limit_buyers"] != float64(0) {
		t.Errorf("reconcile of the archived sale: exit %d, %v; want balanced, archived with 5 claims", code, report)
	}
	if o, _ := report["orders"].(map[string]any); fmt.Sprint(o["paid"], o["cancelled"]) != "map[count:2 units:2] map[count:3 units:3]" {
		t.Errorf("archived sale's orders %v; want 2 paid, 3 cancelled", report["orders"])
	}
	// A replayed key gets the sale's end, as it would have before.
	if r := e.reserve(sale, winners[ids[0]], 1, "key-0"); r.code() != "ended" {
		t.Errorf("replay after archiving: %d %v; want ended", r.status, r.body)
	}
}
