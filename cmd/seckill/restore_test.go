package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// testClock is the engine's clock, moved forward by tests.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *testClock) hook() func(*Main)       { return func(m *Main) { m.now = c.now } }
func fastRestores(base func(*Config)) func(*Config) {
	return func(c *Config) {
		base(c)
		// These tests race the buyer's own pay against restores and the
		// sweeper: the demo's buyer pay. The shop's payments have tests
		// of their own (payment_test.go).
		c.BuyerPay = "on"
		c.SweepInterval = 100 * time.Millisecond
		c.RestoreRetryInterval = 100 * time.Millisecond
		c.ReconcileInterval = 100 * time.Millisecond
	}
}

func (e *engine) restore(id, reason string) reply {
	e.t.Helper()
	return e.admin("POST", "/admin/v1/restores", map[string]any{"reservation_id": id, "reason": reason})
}

func (e *engine) buyer(id, tok, action string) reply {
	e.t.Helper()
	return e.do("POST", "/api/v1/reservations/"+id+"/"+action, tok, nil)
}

// waitRemaining waits until the stock store shows want units remaining.
func (e *engine) waitRemaining(sale string, want int64) {
	e.t.Helper()
	var got int64
	if !servicetest.Eventually(30*time.Second, func() bool { got = e.stock(sale).Remaining(); return got == want }) {
		e.t.Fatalf("remaining stock %d, want %d", got, want)
	}
}

// reconcileCLI runs `seckill reconcile --json` against the engine's
// stores and returns the report and the exit code.
func (e *engine) reconcileCLI(sale string) (map[string]any, int) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"reconcile", "--sale", sale, "--json",
		"--redis-url", e.m.Config.RedisURL, "--redis-key-prefix", e.m.Config.RedisKeyPrefix,
		"--database-url", e.m.Config.DatabaseURL, "--in-flight-grace", "1s"}, &out, &errOut)
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		e.t.Fatalf("reconcile exited %d, printed %q (stderr %q): %v", code, out.String(), errOut.String(), err)
	}
	return rep, code
}

// waitMetric waits until /metrics shows every one of lines.
func (e *engine) waitMetric(lines ...string) {
	e.t.Helper()
	missing := ""
	shown := func() bool {
		resp, err := e.client.Get(e.base + "/metrics")
		if err != nil {
			e.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing = ""
		for _, l := range lines {
			if !strings.Contains(string(body), "\n"+l+"\n") {
				missing = l
			}
		}
		return missing == ""
	}
	if !servicetest.Eventually(30*time.Second, shown) {
		e.t.Fatalf("/metrics never showed %s", missing)
	}
}

func num(m map[string]any, path ...string) float64 {
	var v any = m
	for _, k := range path {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	f, _ := v.(float64)
	return f
}

// TestRestoreResellReconcile is issue 4's proof: sell 200 units to 2,000
// buyers, cancel 30 orders through admin restores, buyer cancels and
// expired payments, with duplicates and races, sell those 30 units again,
// and reconcile to balanced: 200 active orders, 30 cancelled, oversold 0.
func TestRestoreResellReconcile(t *testing.T) {
	clk := &testClock{}
	e := startEngine(t, fastRestores(stacks[0].config(t)), clk.hook())
	sale := e.liveSale(200, 1)

	_, winners := e.rush(sale, 2000, "first")
	if len(winners) != 200 {
		t.Fatalf("%d claims, want 200", len(winners))
	}
	e.awaitOrders(winners, time.Minute)

	var ids []string
	for id := range winners {
		ids = append(ids, id)
	}
	admin, byBuyer, expire, keep := ids[:10], ids[10:20], ids[20:30], ids[30:]

	for _, id := range keep {
		if r := e.buyer(id, winners[id], "pay"); r.status != 200 || r.body["status"] != "paid" {
			t.Fatalf("pay %s: %d %v", id, r.status, r.body)
		}
	}

	// Admin restores, each sent three times at once, one of them racing
	// the buyer's own cancel.
	var wg sync.WaitGroup
	var restoredAnswers atomic.Int64
	for i, id := range admin {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.restore(id, "operator refund")
				if r.status != 200 {
					t.Errorf("admin restore %s: %d %v", id, r.status, r.body)
				}
				if r.body["status"] == "restored" {
					restoredAnswers.Add(1)
				}
			}()
		}
		if i%2 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); e.buyer(id, winners[id], "cancel") }()
		}
	}
	// Buyer cancels, double-clicked, half racing an admin restore.
	for i, id := range byBuyer {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := e.buyer(id, winners[id], "cancel"); r.status != 200 || r.body["status"] != "cancelled" {
					t.Errorf("buyer cancel %s: %d %v", id, r.status, r.body)
				}
			}()
		}
		if i%2 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); e.restore(id, "operator") }()
		}
	}
	wg.Wait()
	// A restore of a paid order is refused and changes nothing.
	if r := e.restore(keep[0], "mistake"); r.status != 409 || r.code() != "state_conflict" {
		t.Fatalf("restore of a paid order: %d %v", r.status, r.body)
	}

	// The payment deadline passes for the last 10; their buyers try to pay
	// late and an operator restores some of them too, while the sweeper runs.
	clk.advance(16 * time.Minute)
	for i, id := range expire {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if r := e.buyer(id, winners[id], "pay"); r.status != 409 {
				t.Errorf("late payment of %s: %d %v, want 409", id, r.status, r.body)
			}
		}()
		go func() {
			defer wg.Done()
			if i%3 == 0 {
				e.restore(id, "operator")
			}
		}()
	}
	wg.Wait()
	e.waitRemaining(sale, 30)
	for _, id := range append(append(append([]string{}, admin...), byBuyer...), expire...) {
		o, err := e.m.orders.Order(context.Background(), id)
		if err != nil || o.Status != seckill.OrderCancelled {
			t.Fatalf("order %s after its cancel: %+v, %v", id, o, err)
		}
	}
	if got := e.dbSale(sale)["unsold"]; got != float64(30) {
		t.Fatalf("database unsold %v after 30 restores, want 30 (each restored once)", got)
	}
	if r := e.do("GET", "/api/v1/sales/"+sale, "", nil); r.body["state"] != "live" || r.body["remaining"] != float64(30) {
		t.Fatalf("public sale after restores: %v, want live with 30 remaining", r.body)
	}

	// The 30 units sell again, to new buyers only.
	outcomes, again := e.rush(sale, 300, "second")
	if len(again) != 30 || outcomes["409 sold_out"] != 270 {
		t.Fatalf("resale: %v, want 30 claims and 270 sold_out", outcomes)
	}
	e.awaitOrders(again, time.Minute)

	rep, code := e.reconcileCLI(sale)
	t.Logf("reconcile: exit %d, balanced %v, orders %v, oversold %v, admin restores answered restored %d times",
		code, rep["balanced"], rep["orders"], rep["oversold"], restoredAnswers.Load())
	if code != 0 || rep["balanced"] != true || num(rep, "oversold") != 0 {
		t.Fatalf("reconcile: exit %d, report %v", code, rep)
	}
	active := num(rep, "orders", "ordered", "count") + num(rep, "orders", "paid", "count")
	if active != 200 || num(rep, "orders", "cancelled", "count") != 30 || num(rep, "orders", "paid", "count") != 170 {
		t.Fatalf("reconcile orders %v, want 200 active (170 paid) and 30 cancelled", rep["orders"])
	}
	// The same verdict reaches Prometheus.
	e.waitMetric(`seckill_reconcile_balanced{sale="`+sale+`"} 1`, `seckill_reconcile_oversold_units{sale="`+sale+`"} 0`)

	var table bytes.Buffer
	if code := run(context.Background(), []string{"reconcile", "--sale", sale, "--redis-url", e.m.Config.RedisURL,
		"--redis-key-prefix", e.m.Config.RedisKeyPrefix, "--database-url", e.m.Config.DatabaseURL}, &table, &table); code != 0 {
		t.Fatalf("reconcile table exited %d:\n%s", code, table.String())
	}
	t.Logf("seckill reconcile --sale %s:\n%s", sale, table.String())
}

// TestRestoreBeforeTheOrder: restores that arrive while the reservation is
// still in the outbox or the broker are parked, and applied when the order
// lands (the order is created cancelled); a restore of a reservation that
// never existed stays parked and, after the alert delay, is listed as an
// alert.
func TestRestoreBeforeTheOrder(t *testing.T) {
	clk := &testClock{}
	// The writer consumes nothing until released, so that the restores
	// arrive before their reservations reach the database.
	hold := &heldWriter{open: make(chan struct{})}
	t.Cleanup(hold.release)
	e := startEngine(t, fastRestores(stacks[1].config(t)), clk.hook(), wrapRole("writer", func(b seckill.Broker) seckill.Broker { hold.Broker = b; return hold }))
	sale := e.liveSale(5, 1)
	_, winners := e.rush(sale, 5, "early")
	if len(winners) != 5 {
		t.Fatalf("%d claims, want 5", len(winners))
	}
	var first string
	for id := range winners {
		first = id
		break
	}
	// 20 concurrent restores of one reservation still in flight: all parked.
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.restore(first, "early refund"); r.status != 202 || r.body["status"] != "parked" {
				t.Errorf("early restore: %d %v, want 202 parked", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	ghost := seckill.NewReservationID(sale, time.Now())
	ghostParkedAt := time.Now()
	if r := e.restore(ghost, "typo"); r.status != 202 {
		t.Fatalf("restore of a reservation that never existed: %d %v, want 202 parked", r.status, r.body)
	}

	hold.release()
	delete(winners, first)
	e.awaitOrders(winners, time.Minute)
	var (
		o   *seckill.Order
		err error
	)
	if !servicetest.Eventually(30*time.Second, func() bool {
		o, err = e.m.orders.Order(context.Background(), first)
		return err == nil && o.Status == seckill.OrderCancelled
	}) {
		t.Fatalf("the early-restored order: %+v, %v; want it created cancelled", o, err)
	}
	if o.CancelReason != "early refund" {
		t.Fatalf("order created cancelled with reason %q", o.CancelReason)
	}
	e.waitRemaining(sale, 1)
	if got := e.dbSale(sale)["unsold"]; got != float64(1) {
		t.Fatalf("database unsold %v, want 1: the cancelled order took no stock", got)
	}
	if r := e.restore(first, "again"); r.status != 200 || r.body["status"] != "already_restored" {
		t.Fatalf("restore after it was applied: %d %v", r.status, r.body)
	}

	// The ghost stays parked; an hour later it is an alert.
	if r := e.admin("GET", "/admin/v1/restores?state=alerted", nil); len(r.body["restores"].([]any)) != 0 {
		t.Fatalf("alerted before the delay: %v", r.body)
	}
	clk.advance(61 * time.Minute)
	var alerted reply
	if !servicetest.Eventually(30*time.Second, func() bool {
		alerted = e.admin("GET", "/admin/v1/restores?state=alerted", nil)
		list, _ := alerted.body["restores"].([]any)
		return len(list) == 1 && list[0].(map[string]any)["reservation_id"] == ghost
	}) {
		t.Fatalf("no alert for the never-existing reservation: %v", alerted.body)
	}
	// Past the in-flight grace, reconciliation names the stuck restore and
	// exits non-zero: someone must look at it.
	time.Sleep(time.Until(ghostParkedAt.Add(1500 * time.Millisecond)))
	rep, code := e.reconcileCLI(sale)
	if num(rep, "oversold") != 0 || num(rep, "restores", "parked") != 1 || num(rep, "restores", "alerted") != 1 {
		t.Fatalf("reconcile after an early restore: exit %d, %v", code, rep)
	}
	list, _ := rep["discrepancies"].([]any)
	if code != 3 || rep["balanced"] != false || len(list) != 1 ||
		list[0].(map[string]any)["kind"] != "restore_for_unknown_reservation" || list[0].(map[string]any)["reservation_id"] != ghost {
		t.Fatalf("reconcile with a stuck restore: exit %d, balanced %v, discrepancies %v; want exit 3 naming %s", code, rep["balanced"], list, ghost)
	}
}
