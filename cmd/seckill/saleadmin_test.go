package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// operatorDo is an admin call made as a named operator.
func (e *engine) operatorDo(method, path, name string, body any) reply {
	e.t.Helper()
	return e.do(method, path, e.m.Config.AdminToken, body, "Content-Type", "application/json", "X-Seckill-Operator", name)
}

// listSales pages through GET /admin/v1/sales?state=… and returns the ids
// listed, in order, with the phase of each.
func (e *engine) listSales(state string, limit int) (ids []string, phases map[string]string) {
	e.t.Helper()
	phases = map[string]string{}
	after := ""
	for range 1000 {
		path := "/admin/v1/sales?limit=" + strconv.Itoa(limit)
		if state != "" {
			path += "&state=" + state
		}
		if after != "" {
			path += "&after=" + after
		}
		r := e.admin("GET", path, nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("GET %s: %d %v", path, r.status, r.body)
		}
		for _, s := range r.body["sales"].([]any) {
			m := s.(map[string]any)
			id := m["id"].(string)
			ids = append(ids, id)
			phases[id], _ = m["phase"].(string)
		}
		next, _ := r.body["next"].(string)
		if next == "" {
			return ids, phases
		}
		after = next
	}
	e.t.Fatal("more than 1000 pages")
	return nil, nil
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestSalesAdmin runs a sale from the operator's side through the API:
// list, currency, edit before the start, add stock while live, end early,
// the audit log, and remaining never above the database's unsold stock.
func TestSalesAdmin(t *testing.T) {
	e := startEngine(t, func(c *Config) { c.Currency = "CNY" })
	now := time.Now()

	// GET /admin/v1/sales used to answer 405.
	if r := e.admin("GET", "/admin/v1/sales", nil); r.status != http.StatusOK {
		t.Fatalf("GET /admin/v1/sales: %d %v", r.status, r.body)
	}
	sched := e.createSale(10, 1, now.Add(time.Hour), now.Add(2*time.Hour))
	live := e.liveSale(1, 5)
	ids, _ := e.listSales("scheduled", 1)
	if !containsID(ids, sched) || containsID(ids, live) {
		t.Errorf("scheduled list = %v, want %s and not %s", ids, sched, live)
	}
	if ids, _ := e.listSales("live", 1); !containsID(ids, live) || containsID(ids, sched) {
		t.Errorf("live list = %v, want %s only", ids, live)
	}
	if r := e.admin("GET", "/admin/v1/sales?state=bogus", nil); r.status != http.StatusBadRequest || r.code() != seckill.EINVALID {
		t.Errorf("bad state: %d %v", r.status, r.body)
	}

	// Currency: the default for a sale created without one, in the
	// public view and the admin one.
	pub := e.do("GET", "/api/v1/sales/"+sched, "", nil)
	if pub.body["currency"] != "CNY" || pub.body["price_cents"] != float64(9900) {
		t.Errorf("public sale: %v, want price 9900 CNY", pub.body)
	}
	r := e.admin("POST", "/admin/v1/sales", map[string]any{"name": "x", "price_cents": 100, "currency": "XYZ", "stock": 1,
		"per_user_limit": 1, "start_at": now.Add(time.Hour).Format(time.RFC3339), "end_at": now.Add(2 * time.Hour).Format(time.RFC3339)})
	if r.status != http.StatusBadRequest {
		t.Errorf("sale in currency XYZ: %d %v, want 400", r.status, r.body)
	}

	// Edit before the start.
	r = e.operatorDo("PATCH", "/admin/v1/sales/"+sched, "alice", map[string]any{"stock": 5, "per_user_limit": 2, "currency": "USD"})
	if r.status != http.StatusOK || r.body["stock"] != float64(5) || r.body["currency"] != "USD" {
		t.Fatalf("edit: %d %v", r.status, r.body)
	}
	if got := e.stock(sched); got.Total != 5 {
		t.Errorf("stock store after the edit: %+v, want total 5 (the edit loads it)", got)
	}
	if r := e.operatorDo("PATCH", "/admin/v1/sales/"+sched, "alice", map[string]any{"version": 1, "stock": 6}); r.status != http.StatusConflict || r.code() != seckill.ECONFLICT {
		t.Errorf("edit at a stale version: %d %v", r.status, r.body)
	}
	if r := e.operatorDo("PATCH", "/admin/v1/sales/"+live, "alice", map[string]any{"stock": 6}); r.status != http.StatusConflict || r.code() != seckill.ESTATECONFLICT {
		t.Errorf("edit of a live sale: %d %v", r.status, r.body)
	}
	if r := e.operatorDo("PATCH", "/admin/v1/sales/"+sched, "alice", map[string]any{"bogus": 1}); r.status != http.StatusBadRequest {
		t.Errorf("edit with an unknown field: %d %v", r.status, r.body)
	}

	// Add stock to a live, sold-out sale: claims go through again.
	if r := e.reserve(live, e.token("b1"), 1, ""); r.status != http.StatusAccepted {
		t.Fatalf("first claim: %d %v", r.status, r.body)
	}
	if r := e.reserve(live, e.token("b2"), 1, ""); r.code() != seckill.ESOLDOUT {
		t.Fatalf("second claim: %d %v, want sold_out", r.status, r.body)
	}
	r = e.operatorDo("POST", "/admin/v1/sales/"+live+"/stock", "bob", map[string]any{"add": 2})
	if r.status != http.StatusOK || r.body["stock"] != float64(3) {
		t.Fatalf("add stock: %d %v", r.status, r.body)
	}
	if got := e.stock(live); got.Total != 3 {
		t.Errorf("stock store after adding 2: %+v, want total 3", got)
	}
	// This node's sold-out flag is cleared at once.
	if r := e.reserve(live, e.token("b2"), 1, ""); r.status != http.StatusAccepted {
		t.Errorf("claim after adding stock: %d %v", r.status, r.body)
	}

	// End early: the next claim is refused as ended.
	r = e.operatorDo("POST", "/admin/v1/sales/"+live+"/end", "carol", nil)
	if r.status != http.StatusOK || r.body["changed"] != true {
		t.Fatalf("end: %d %v", r.status, r.body)
	}
	if r := e.reserve(live, e.token("b3"), 1, ""); r.code() != seckill.EENDED {
		t.Errorf("claim after the end: %d %v, want ended", r.status, r.body)
	}
	if r := e.operatorDo("POST", "/admin/v1/sales/"+live+"/end", "carol", nil); r.status != http.StatusOK || r.body["changed"] != false {
		t.Errorf("second end: %d %v, want changed false", r.status, r.body)
	}
	if r := e.operatorDo("POST", "/admin/v1/sales/"+live+"/stock", "bob", map[string]any{"add": 1}); r.code() != seckill.ESTATECONFLICT {
		t.Errorf("add stock to an ended sale: %d %v", r.status, r.body)
	}
	ids, phases := e.listSales("ended", 50)
	if !containsID(ids, live) || phases[live] != "draining" {
		t.Errorf("ended list = %v phases %v, want %s draining (its Redis keys are there)", ids, phases, live)
	}

	// Who did what, newest first.
	r = e.admin("GET", "/admin/v1/sales/"+live+"/audit", nil)
	var actions []string
	for _, a := range r.body["audit"].([]any) {
		m := a.(map[string]any)
		actions = append(actions, m["action"].(string)+" by "+strings.Fields(m["actor"].(string))[0])
	}
	want := []string{"sale.end by carol", "sale.add_stock by bob", "sale.create by admin"}
	if strings.Join(actions, ", ") != strings.Join(want, ", ") {
		t.Errorf("audit log = %v, want %v", actions, want)
	}
	if r := e.admin("GET", "/admin/v1/sales/"+sched+"/audit", nil); len(r.body["audit"].([]any)) != 2 {
		t.Errorf("audit of the edited sale = %v, want create and edit", r.body)
	}
}

// TestRemainingNeverAboveUnsold: when Redis and the database disagree
// (203 of 200 in the field), the public figure is the database's.
func TestRemainingNeverAboveUnsold(t *testing.T) {
	e := startEngine(t, nil)
	sale := e.liveSale(5, 5)
	if _, err := e.m.stock.Admin().RaiseStock(context.Background(), sale, 8, 3); err != nil {
		t.Fatal(err)
	}
	if got := e.stock(sale); got.Remaining() != 8 {
		t.Fatalf("Redis remaining = %d, want 8 (the disagreement under test)", got.Remaining())
	}
	for _, path := range []string{"/api/v1/sales/" + sale, "/admin/v1/sales/" + sale} {
		r := e.admin("GET", path, nil)
		if r.body["remaining"] != float64(5) {
			t.Errorf("GET %s: remaining %v, want 5 (the database's unsold)", path, r.body["remaining"])
		}
	}
	r := e.admin("GET", "/admin/v1/sales?state=live", nil)
	for _, v := range r.body["sales"].([]any) {
		if v := v.(map[string]any); v["id"] == sale && v["remaining"] != float64(5) {
			t.Errorf("GET /admin/v1/sales: remaining %v, want 5 (the database's unsold)", v["remaining"])
		}
	}
	resp, err := e.client.Get(e.base + "/sales/" + sale)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), `data-remaining="5"`) {
		t.Errorf("buyer page does not show remaining 5")
	}
}

// TestEndEarlyStopsEveryNode: a sale ended on one node refuses claims on
// another at once (Redis's window decides), and the other node's public
// view says ended as soon as the announcement reaches it.
func TestEndEarlyStopsEveryNode(t *testing.T) {
	backends := realBackends(t)
	a, b := startEngine(t, backends), startEngine(t, backends)
	sale := a.liveSale(10, 1)
	if r := b.reserve(sale, b.token("before"), 1, ""); r.status != http.StatusAccepted {
		t.Fatalf("claim on node b before the end: %d %v", r.status, r.body)
	}
	if r := b.do("GET", "/api/v1/sales/"+sale, "", nil); r.body["state"] != "live" {
		t.Fatalf("node b's view before the end: %v", r.body)
	}
	if r := a.operatorDo("POST", "/admin/v1/sales/"+sale+"/end", "fay", nil); r.status != http.StatusOK || r.body["changed"] != true {
		t.Fatalf("end on node a: %d %v", r.status, r.body)
	}
	if r := b.reserve(sale, b.token("after"), 1, ""); r.code() != seckill.EENDED {
		t.Errorf("claim on node b right after the end on a: %d %v, want ended", r.status, r.body)
	}
	servicetest.WaitFor(t, 10*time.Second, "node b's public view to say ended", func() bool {
		return b.do("GET", "/api/v1/sales/"+sale, "", nil).body["state"] == "ended"
	})
}

// TestSaleChangesReachEveryScheduler: an operator's changes on node a
// (an edit of a due sale, added stock, an early end) reach the preheat
// scheduler's loaded list, which the gauges and heal watch, on a at once
// and on b within its next passes; the ended sale is listed no more.
func TestSaleChangesReachEveryScheduler(t *testing.T) {
	backends := realBackends(t)
	fast := func(c *Config) { backends(c); c.PreheatInterval = 50 * time.Millisecond }
	a, b := startEngine(t, fast), startEngine(t, fast)
	loaded := func(e *engine, id string) *seckill.Sale {
		for _, s := range e.m.preheat.Loaded() {
			if s.ID == id {
				return s
			}
		}
		return nil
	}
	now := time.Now()
	due := a.createSale(10, 1, now.Add(5*time.Minute), now.Add(time.Hour))
	live := a.liveSale(10, 1)
	servicetest.WaitFor(t, 10*time.Second, "node b to load both sales", func() bool {
		return loaded(b, due) != nil && loaded(b, live) != nil
	})

	if r := a.operatorDo("PATCH", "/admin/v1/sales/"+due, "gil", map[string]any{"stock": 7, "per_user_limit": 2}); r.status != http.StatusOK {
		t.Fatalf("edit on node a: %d %v", r.status, r.body)
	}
	if r := a.operatorDo("POST", "/admin/v1/sales/"+live+"/stock", "gil", map[string]any{"add": 3}); r.status != http.StatusOK {
		t.Fatalf("add stock on node a: %d %v", r.status, r.body)
	}
	if s := loaded(a, due); s == nil || s.Stock != 7 || s.PurchaseLimit != 2 {
		t.Errorf("node a's row of the edited sale: %+v, want stock 7, limit 2", s)
	}
	if s := loaded(a, live); s == nil || s.Stock != 13 {
		t.Errorf("node a's row after adding stock: %+v, want stock 13", s)
	}
	servicetest.WaitFor(t, 10*time.Second, "node b's rows to show the edit and the added stock", func() bool {
		d, l := loaded(b, due), loaded(b, live)
		return d != nil && d.Stock == 7 && d.PurchaseLimit == 2 && l != nil && l.Stock == 13
	})

	if r := a.operatorDo("POST", "/admin/v1/sales/"+live+"/end", "gil", nil); r.status != http.StatusOK || r.body["changed"] != true {
		t.Fatalf("end on node a: %d %v", r.status, r.body)
	}
	if s := loaded(a, live); s != nil {
		t.Errorf("node a still lists the ended sale: %+v", s)
	}
	servicetest.WaitFor(t, 10*time.Second, "node b to drop the ended sale", func() bool { return loaded(b, live) == nil })
	if loaded(b, due) == nil {
		t.Error("node b dropped the due sale too")
	}
}

// TestResolveFailedOrders re-drives and refunds failed orders through the
// API: idempotent, refused with the reason when the database cannot take
// it, audited and counted.
func TestResolveFailedOrders(t *testing.T) {
	e := startEngine(t, nil)
	ctx := context.Background()
	sale := e.liveSale(2, 1)
	record := func(user string) string {
		id := seckill.NewReservationID(sale, time.Now())
		err := e.m.orders.RecordFailedOrder(ctx, &seckill.FailedOrder{ReservationID: id, SaleID: sale, UserID: user, Qty: 1,
			Reason: "insufficient database stock: test", Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	resolve := func(id, action, note string) reply {
		return e.operatorDo("POST", "/admin/v1/failed-orders/"+id+"/resolve", "dora", map[string]any{"action": action, "note": note})
	}
	first, second, third := record("ann"), record("ann"), record("ben")

	r := resolve(first, "redrive", "ticket 12")
	if r.status != http.StatusOK || r.body["changed"] != true {
		t.Fatalf("redrive: %d %v", r.status, r.body)
	}
	// The buyer sees an order now.
	if r := e.do("GET", "/api/v1/reservations/"+first, e.token("ann"), nil); r.body["status"] != "ordered" {
		t.Errorf("buyer's view after the redrive: %v, want ordered", r.body)
	}
	if r := resolve(first, "redrive", "again"); r.status != http.StatusOK || r.body["changed"] != false {
		t.Errorf("second redrive: %d %v, want 200 unchanged", r.status, r.body)
	}
	// Ann's limit is 1: her second one is refused, with the reason.
	r = resolve(second, "redrive", "")
	if r.status != http.StatusConflict || !strings.Contains(r.body["error"].(map[string]any)["message"].(string), seckill.RedriveLimitReached) {
		t.Errorf("redrive over the limit: %d %v", r.status, r.body)
	}
	if r := resolve(second, "refunded", "refunded by support"); r.status != http.StatusOK || r.body["changed"] != true {
		t.Errorf("refunded: %d %v", r.status, r.body)
	}
	if r := resolve(second, "redrive", ""); r.status != http.StatusConflict {
		t.Errorf("redrive of a refunded one: %d %v, want 409", r.status, r.body)
	}
	if r := resolve(third, "redrive", ""); r.status != http.StatusOK {
		t.Errorf("redrive of ben's: %d %v", r.status, r.body)
	}
	for _, bad := range []map[string]any{{"action": "delete"}, {"action": "refunded", "note": strings.Repeat("x", 2000)}, {"action": "refunded", "extra": 1}} {
		if r := e.operatorDo("POST", "/admin/v1/failed-orders/"+third+"/resolve", "dora", bad); r.status != http.StatusBadRequest {
			t.Errorf("resolve %v: %d %v, want 400", bad, r.status, r.body)
		}
	}
	if r := resolve(seckill.NewReservationID(sale, time.Now()), "refunded", ""); r.status != http.StatusNotFound {
		t.Errorf("resolve of no failed order: %d %v, want 404", r.status, r.body)
	}
	// Listed with their resolutions; the sale's stock is all sold.
	r = e.admin("GET", "/admin/v1/failed-orders", nil)
	resolved := 0
	for _, f := range r.body["failed_orders"].([]any) {
		if res, ok := f.(map[string]any)["resolution"].(map[string]any); ok && strings.HasPrefix(res["actor"].(string), "dora") {
			resolved++
		}
	}
	if resolved != 3 {
		t.Errorf("%d failed orders listed as resolved by dora, want 3: %v", resolved, r.body)
	}
	if got := e.dbSale(sale)["unsold"]; got != float64(0) {
		t.Errorf("unsold after two redrives of 2 units = %v, want 0", got)
	}
	e.waitMetric(`seckill_failed_orders_resolved_total{action="redrive",result="resolved"} 2`,
		`seckill_failed_orders_resolved_total{action="redrive",result="refused"} 2`,
		`seckill_failed_orders_resolved_total{action="refunded",result="resolved"} 1`)
	if r := e.admin("GET", "/admin/v1/sales/"+sale+"/audit", nil); len(r.body["audit"].([]any)) != 4 {
		t.Errorf("audit of the sale: %v, want create and three resolutions", r.body)
	}
}

// TestSalesCLI: `seckill sales list|show|end` against a running engine.
func TestSalesCLI(t *testing.T) {
	e := startEngine(t, nil)
	live := e.liveSale(3, 1)
	sched := e.createSale(4, 1, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	run := func(args ...string) (string, int) {
		var out, errOut strings.Builder
		code := run(context.Background(), append(args, "--url", e.base, "--admin-token", e.m.Config.AdminToken), &out, &errOut)
		if code != 0 {
			t.Logf("seckill %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String(), code
	}
	out, code := run("sales", "list", "--limit", "1")
	if code != 0 || !strings.Contains(out, live) || !strings.Contains(out, sched) || !strings.Contains(out, "99.00 EUR") {
		t.Errorf("sales list (pages of 1): exit %d\n%s", code, out)
	}
	if out, _ := run("sales", "list", "--state", "scheduled"); strings.Contains(out, live) || !strings.Contains(out, sched) {
		t.Errorf("sales list --state scheduled:\n%s", out)
	}
	if out, code := run("sales", "show", "--sale", live); code != 0 || !strings.Contains(out, "state:") || !strings.Contains(out, "live") {
		t.Errorf("sales show: exit %d\n%s", code, out)
	}
	if out, code := run("sales", "end", "--sale", live, "--operator", "erin"); code != 0 || !strings.Contains(out, "ended at") {
		t.Errorf("sales end: exit %d\n%s", code, out)
	}
	if r := e.reserve(live, e.token("late"), 1, ""); r.code() != seckill.EENDED {
		t.Errorf("claim after `sales end`: %d %v", r.status, r.body)
	}
	if out, _ := run("sales", "end", "--sale", live); !strings.Contains(out, "already ended") {
		t.Errorf("second sales end:\n%s", out)
	}
	if r := e.admin("GET", "/admin/v1/sales/"+live+"/audit", nil); !strings.Contains(fmt.Sprint(r.body), "erin") {
		t.Errorf("audit does not name erin: %v", r.body)
	}
	if _, code := run("sales", "show", "--sale", "nosuch"); code != 1 {
		t.Errorf("sales show of no sale: exit %d, want 1", code)
	}
	if _, code := run("sales", "bogus"); code != 1 {
		t.Errorf("sales bogus: exit %d, want 1 (usage)", code)
	}
}
