package main

// Browser tests of the control room's operator side: the list of sales
// (filter, pages, open, manage) and failed orders resolved from the room.

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// signInAdmin opens the control room at path and signs in as name.
func (tb *browserTab) signInAdmin(e *webEngine, path, name string) {
	tb.t.Helper()
	tb.do(desktopSized(), chromedp.Navigate(e.url+path))
	tb.waitFor("the sign-in", `!document.getElementById("admin-signin").hidden`, 30*time.Second)
	tb.do(
		chromedp.SetValue(chromedp.ID("admin-token"), e.m.Config.AdminToken),
		chromedp.SetValue(chromedp.ID("admin-operator"), name),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
	)
	tb.waitFor("the console", `!document.getElementById("console").hidden`, 30*time.Second)
}

// listed is the ids the sales list shows, in order.
func (tb *browserTab) listed() string {
	tb.t.Helper()
	return evalJS[string](tb, `Array.from(document.querySelectorAll("#sale-list .sale-item")).map(b => b.dataset.saleId).join(",")`)
}

// filterSales picks a state in the list's filter.
func (tb *browserTab) filterSales(state string) {
	tb.t.Helper()
	_ = evalJS[bool](tb, `(function(){ const s = document.getElementById("sales-state"); s.value = `+strconv.Quote(state)+`; s.dispatchEvent(new Event("change")); return true })()`)
}

// newSale creates a sale named name in currency through the admin API.
func (e *webEngine) newSale(name, currency string, stock int64, start, end time.Time) string {
	e.t.Helper()
	id := servicetest.UniqueName("b")
	r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": id, "name": name, "price_cents": 9900, "currency": currency, "stock": stock, "per_user_limit": 1,
		"start_at": start.Format(time.RFC3339Nano), "end_at": end.Format(time.RFC3339Nano),
	})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create sale %s: %d %v", name, r.status, r.body)
	}
	return id
}

// TestBrowserSalesList: three sales in three states are listed a page at a
// time, filtered by state with the ended one's phase, and opened; the
// room edits the scheduled one, adds stock to the live one and ends it,
// and each change is in the audit log under the operator's name.
func TestBrowserSalesList(t *testing.T) {
	e := startWebEngine(t)
	now := time.Now()
	scheduled := e.newSale("Scheduled tea", "EUR", 50, now.Add(time.Hour), now.Add(2*time.Hour))
	live := e.newSale("Live tea", "USD", 10, now.Add(-time.Second), now.Add(time.Hour))
	ended := e.newSale("Ended tea", "EUR", 20, now.Add(-time.Second), now.Add(time.Hour))
	if r := e.admin("POST", "/admin/v1/sales/"+ended+"/end", nil); r.status != 200 {
		t.Fatalf("end: %d %v", r.status, r.body)
	}
	all := map[string]bool{scheduled: true, live: true, ended: true}

	browser := startChromium(t)
	op := openTab(t, browser, "operator")
	// Two sales a page, so the third needs the cursor.
	op.signInAdmin(e, "/admin?page_size=2", "ops-alice")
	op.waitFor("the first page", `document.querySelectorAll("#sale-list .sale-item").length === 2 && !document.getElementById("sales-more").hidden`, 30*time.Second)
	first := op.listed()
	op.shot("11-control-room-sales-page-1")
	op.do(chromedp.Click(chromedp.ID("sales-more")))
	op.waitFor("the second page", `document.querySelectorAll("#sale-list .sale-item").length === 3 && document.getElementById("sales-more").hidden`, 30*time.Second)
	ids := strings.Split(op.listed(), ",")
	if !strings.HasPrefix(op.listed(), first+",") {
		t.Errorf("the second page replaced the first: %q then %q", first, op.listed())
	}
	for _, id := range ids {
		if !all[id] {
			t.Errorf("the list shows %q, not one of the three sales", id)
		}
		delete(all, id)
	}
	if len(all) != 0 {
		t.Errorf("the list misses %v", all)
	}

	for _, tc := range []struct{ state, want, badge string }{
		{"live", live, "live"},
		{"scheduled", scheduled, "scheduled"},
		{"ended", ended, "ended · draining"},
	} {
		op.filterSales(tc.state)
		op.waitFor(tc.state+" sales", `document.getElementById("sale-list").getAttribute("aria-busy") === "false" && `+
			`Array.from(document.querySelectorAll("#sale-list .sale-item")).map(b => b.dataset.saleId).join(",") === `+strconv.Quote(tc.want), 30*time.Second)
		if got := evalJS[string](op, `document.querySelector("#sale-list .sale-item .badge").textContent`); got != tc.badge {
			t.Errorf("%s filter: badge %q, want %q", tc.state, got, tc.badge)
		}
	}
	op.shot("12-control-room-sales-ended-filter")

	// Open the live one from the list: its state, price in its currency
	// and stock.
	op.filterSales("live")
	op.waitFor("the live sale", `document.querySelector(`+strconv.Quote(`#sale-list .sale-item[data-sale-id="`+live+`"]`)+`) !== null`, 30*time.Second)
	op.do(chromedp.Click(chromedp.CSS(`#sale-list .sale-item[data-sale-id="` + live + `"]`)))
	op.waitFor("the live sale open", `!document.getElementById("sale-view").hidden && document.getElementById("sale-title").textContent === "Live tea"`, 30*time.Second)
	if got := op.text("sale-phase"); got != "live" {
		t.Errorf("phase %q, want live", got)
	}
	wantPrice := evalJS[string](op, `window.seckill.formatPrice(9900, "USD")`)
	if got := op.text("sale-price"); got != wantPrice || got == "99.00" {
		t.Errorf("price %q, want %q (with its currency)", got, wantPrice)
	}
	op.waitFor("the live stock", `document.getElementById("t-remaining").textContent === "10"`, 30*time.Second)
	if !evalJS[bool](op, `document.getElementById("edit-form").hidden`) {
		t.Error("a live sale offers the edit form")
	}

	// Add stock, then end it early.
	op.do(chromedp.SetValue(chromedp.ID("add-stock"), "5"), chromedp.Click(chromedp.CSS(`#stock-form button[type=submit]`)))
	op.waitFor("the added stock", `document.getElementById("manage-msg").textContent.startsWith("Added 5 units")`, 30*time.Second)
	op.waitFor("15 on the dashboard", `document.getElementById("t-remaining").textContent === "15"`, 30*time.Second)
	if r := e.admin("GET", "/admin/v1/sales/"+live, nil); r.body["stock"] != float64(15) || r.body["remaining"] != float64(15) {
		t.Errorf("after adding 5: stock %v remaining %v, want 15 and 15", r.body["stock"], r.body["remaining"])
	}
	op.do(chromedp.Click(chromedp.ID("end-sale")))
	op.waitFor("the armed end button", `document.getElementById("end-sale").textContent.startsWith("Click again")`, 30*time.Second)
	if r := e.admin("GET", "/admin/v1/sales/"+live, nil); r.body["state"] != "live" {
		t.Errorf("one click ended the sale: %v", r.body["state"])
	}
	op.do(chromedp.Click(chromedp.ID("end-sale")))
	op.waitFor("the sale ended", `document.getElementById("manage-msg").textContent.startsWith("Ended") && document.getElementById("sale-phase").textContent.startsWith("ended")`, 30*time.Second)
	if r := e.reserve(live, e.token("late-buyer"), 1, ""); r.status != 409 || r.code() != "ended" {
		t.Errorf("a claim after the end: %d %s, want 409 ended", r.status, r.code())
	}
	op.waitFor("the audit log", `["sale.add_stock", "sale.end"].every(a => document.querySelector("#audit-body tr[data-action='" + a + "']"))`, 30*time.Second)
	if got := evalJS[string](op, `document.querySelector("#audit-body tr[data-action='sale.end']").children[1].textContent`); !strings.HasPrefix(got, "ops-alice") {
		t.Errorf("the audit log has the end by %q, want ops-alice", got)
	}
	op.shot("13-control-room-sale-ended")

	// Edit the scheduled one before its start.
	op.do(chromedp.SetValue(chromedp.ID("open-id"), scheduled), chromedp.Click(chromedp.CSS(`#open-form button[type=submit]`)))
	op.waitFor("the scheduled sale's form", `document.getElementById("sale-title").textContent === "Scheduled tea" && !document.getElementById("edit-form").hidden && document.getElementById("e-stock").value === "50"`, 30*time.Second)
	op.do(chromedp.SetValue(chromedp.ID("e-stock"), "42"), chromedp.SetValue(chromedp.ID("e-name"), "Scheduled tea (42)"),
		chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
	op.waitFor("the edit saved", `document.getElementById("manage-msg").textContent === "Saved." && document.getElementById("sale-title").textContent === "Scheduled tea (42)"`, 30*time.Second)
	if r := e.admin("GET", "/admin/v1/sales/"+scheduled, nil); r.body["stock"] != float64(42) || r.body["name"] != "Scheduled tea (42)" {
		t.Errorf("after the edit: %v", r.body)
	}
	op.waitFor("the edit in the audit log", `document.querySelector("#audit-body tr[data-action='sale.edit']") !== null`, 30*time.Second)
	op.shot("14-control-room-sale-edited")
	op.noErrors()
}

// TestBrowserResolveFailedOrder: two failed orders of one sale are
// resolved from the room, though another sale has more than a page of
// newer ones (the room once read only the newest 1000 of every sale). A
// re-drive that would take a buyer past the limit is refused with the
// reason shown; that row is then closed as refunded with a note; the
// other is re-driven into an order. Each resolution is in the audit log
// and in the metrics, and the remaining stock the room shows follows the
// database below Redis's figure.
func TestBrowserResolveFailedOrder(t *testing.T) {
	e := startWebEngine(t)
	sale := e.newSale("Failing tea", "EUR", 3, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	// greedy buys their one unit the ordinary way, and it lands.
	r := e.reserve(sale, e.token("greedy"), 1, "")
	if r.status != 202 {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	resID, _ := r.body["reservation_id"].(string)
	servicetest.WaitFor(t, 30*time.Second, "greedy's order", func() bool {
		return e.do("GET", "/api/v1/reservations/"+resID, e.token("greedy"), nil).body["status"] == "ordered"
	})
	// Two failed orders: greedy's second claim, past the limit, and one of
	// unlucky's the database turned down.
	ctx := context.Background()
	overLimit := seckill.NewReservationID(sale, time.Now())
	rejected := seckill.NewReservationID(sale, time.Now())
	for _, f := range []*seckill.FailedOrder{
		{ReservationID: overLimit, SaleID: sale, UserID: "greedy", Qty: 1, Reason: "over_limit (test)", Attempts: 1, CreatedAt: time.Now()},
		{ReservationID: rejected, SaleID: sale, UserID: "unlucky", Qty: 1, Reason: "insufficient_stock (test)", Attempts: 5, CreatedAt: time.Now()},
	} {
		if err := e.m.orders.RecordFailedOrder(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	// Then a flood of newer ones in another sale (its database short of
	// stock): more than the largest page of failed orders, so that this
	// sale's two are not among the newest of every sale's.
	flooded := e.newSale("Flooded tea", "EUR", 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	var flood []seckill.ReservationEvent
	for i := range 1200 {
		flood = append(flood, seckill.ReservationEvent{ReservationID: seckill.NewReservationID(flooded, time.Now()),
			SaleID: flooded, UserID: "crowd-" + strconv.Itoa(i), Qty: 1, ReservedAt: time.Now()})
	}
	if out, err := e.m.orders.PersistReservations(ctx, flooded, flood, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	} else if out[len(out)-1] != seckill.PersistRejected {
		t.Fatalf("the flood's last event: %v, want rejected", out[len(out)-1])
	}
	newest, _, err := e.m.orders.FailedOrders(ctx, seckill.FailedOrderFilter{Limit: seckill.MaxFailedOrderPage})
	if err != nil || len(newest) != seckill.MaxFailedOrderPage || newest[len(newest)-1].SaleID != flooded {
		t.Fatalf("the newest %d failed orders: %d, %v; want all of the flooded sale's", seckill.MaxFailedOrderPage, len(newest), err)
	}

	browser := startChromium(t)
	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops-bob")
	// The sidebar says which sale has failed orders waiting; it opens it.
	waiting := `#open-failed .sale-item[data-sale-id="` + sale + `"]`
	op.waitFor("the sale among those with failed orders", `(document.querySelector(`+strconv.Quote(waiting)+`) || {textContent: ""}).textContent.includes("2 open")`, 30*time.Second)
	op.do(chromedp.Click(chromedp.CSS(waiting)))
	row := func(id string) string {
		return `document.querySelector(` + strconv.Quote(`#failed-body tr[data-reservation-id="`+id+`"]`) + `)`
	}
	op.waitFor("both failed orders", row(overLimit)+` !== null && `+row(rejected)+` !== null && document.getElementById("t-failed").textContent === "2"`, 30*time.Second)
	op.shot("15-control-room-failed-orders-open")

	// Re-driving greedy's second claim is refused, and the room says why.
	op.do(chromedp.Click(chromedp.CSS(`#failed-body tr[data-reservation-id="` + overLimit + `"] button[data-action=redrive]`)))
	op.waitFor("the refusal", `document.getElementById("failed-msg").textContent.includes(`+strconv.Quote(seckill.RedriveLimitReached)+`)`, 30*time.Second)
	op.waitFor("the reason on the row", row(overLimit)+`.querySelector(".failed-status").textContent.includes(`+strconv.Quote(seckill.RedriveLimitReached)+`)`, 30*time.Second)
	op.shot("16-control-room-redrive-refused")
	// Refunding it needs a note.
	op.do(chromedp.Click(chromedp.CSS(`#failed-body tr[data-reservation-id="` + overLimit + `"] button[data-action=refunded]`)))
	op.waitFor("the note asked for", `document.getElementById("failed-msg").textContent.startsWith("Write a note")`, 30*time.Second)
	op.do(
		chromedp.SendKeys(chromedp.CSS(`#failed-body tr[data-reservation-id="`+overLimit+`"] .resolve-note`), "refunded by card, ticket 42"),
		chromedp.Click(chromedp.CSS(`#failed-body tr[data-reservation-id="`+overLimit+`"] button[data-action=refunded]`)),
	)
	op.waitFor("refunded", row(overLimit)+`.dataset.resolution === "refunded" && `+row(overLimit)+`.querySelector(".failed-status").textContent.includes("refunded by card, ticket 42")`, 30*time.Second)

	// unlucky's is re-driven into an order.
	op.do(chromedp.Click(chromedp.CSS(`#failed-body tr[data-reservation-id="` + rejected + `"] button[data-action=redrive]`)))
	op.waitFor("re-driven", row(rejected)+`.dataset.resolution === "redrive" && `+row(rejected)+`.querySelector(".failed-status").textContent.startsWith("Re-driven into order")`, 30*time.Second)
	if evalJS[bool](op, row(rejected)+`.querySelector("button[data-action=redrive]") !== null`) {
		t.Error("a re-driven row still offers Re-drive")
	}
	op.waitFor("both in the audit log", `["failed_order.refunded", "failed_order.redrive"].every(a => document.querySelector("#audit-body tr[data-action='" + a + "']"))`, 30*time.Second)
	if got := evalJS[string](op, `document.querySelector("#audit-body tr[data-action='failed_order.redrive']").textContent`); !strings.Contains(got, "ops-bob") || !strings.Contains(got, rejected) {
		t.Errorf("audit entry of the re-drive %q: want ops-bob and %s", got, rejected)
	}
	// The re-drive took a unit in the database and, since Redis never saw
	// that claim, in Redis too (no false alarm for the heal watcher): both
	// have 1 left, and the room shows it.
	op.waitFor("the room's remaining", `document.getElementById("t-remaining").textContent === "1"`, 30*time.Second)
	if lvl := e.stock(sale); lvl.Remaining() != 1 || lvl.Heals != 0 {
		t.Errorf("Redis remaining %d after %d heals, want 1 after none", lvl.Remaining(), lvl.Heals)
	}
	// Nothing left of this sale in the sidebar; the flood is all there.
	floodedWaiting := `#open-failed .sale-item[data-sale-id="` + flooded + `"]`
	op.waitFor("nothing left to resolve of this sale in the sidebar", `document.querySelector(`+strconv.Quote(waiting)+`) === null && `+
		`(document.querySelector(`+strconv.Quote(floodedWaiting)+`) || {textContent: ""}).textContent.includes("`+strconv.Itoa(len(flood)-1)+` open")`, 30*time.Second)
	op.shot("17-control-room-failed-orders-resolved")

	// The engine agrees: both resolved, the order exists, the metrics count.
	list := e.admin("GET", "/admin/v1/failed-orders?sale_id="+sale, nil)
	got := map[string]string{}
	for _, f := range list.body["failed_orders"].([]any) {
		f := f.(map[string]any)
		if res, ok := f["resolution"].(map[string]any); ok {
			got[f["reservation_id"].(string)] = res["action"].(string)
		}
	}
	if got[overLimit] != "refunded" || got[rejected] != "redrive" {
		t.Errorf("resolutions %v", got)
	}
	if s := e.do("GET", "/api/v1/reservations/"+rejected, e.token("unlucky"), nil).body["status"]; s != "ordered" {
		t.Errorf("the re-driven reservation is %v, want ordered", s)
	}
	metrics := func() string {
		resp, err := e.client.Get(e.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}()
	for _, want := range []string{
		`seckill_failed_orders_resolved_total{action="redrive",result="refused"} 1`,
		`seckill_failed_orders_resolved_total{action="redrive",result="resolved"} 1`,
		`seckill_failed_orders_resolved_total{action="refunded",result="resolved"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	t.Logf("resolved %s (refunded) and %s (re-driven) from the room", overLimit, rejected)

	// The flooded sale's table comes a page at a time, each row once.
	rows := `document.querySelectorAll("#failed-body tr")`
	distinct := `new Set(Array.from(` + rows + `).map(r => r.dataset.reservationId)).size`
	op.do(chromedp.Click(chromedp.CSS(floodedWaiting)))
	op.waitFor("the flood's first page", rows+`.length === 100 && `+row(newest[0].ReservationID)+` !== null && !document.getElementById("failed-more").hidden`, 30*time.Second)
	// The table also refreshes while "More" is on its way: when the
	// sale's count of failed orders moves (here one more lands), or every
	// 15 s. The refresh supersedes the page "More" asked for, so it must
	// read those rows too; it once read only the rows shown, and under load
	// the click was lost (one page, and "More" again). "More"'s request is
	// held until the refresh has gone out.
	late := &seckill.FailedOrder{ReservationID: seckill.NewReservationID(flooded, time.Now()), SaleID: flooded,
		UserID: "crowd-late", Qty: 1, Reason: "insufficient_stock (test)", Attempts: 1, CreatedAt: time.Now()}
	paused, stop := op.pauseRequests(`*/admin/v1/failed-orders\?*`)
	op.do(chromedp.Click(chromedp.ID("failed-more")))
	// A refresh that went out before the click (the 15 s one, or one the
	// live feed set off) is let through: "More" supersedes it, and the
	// table ignores its answer.
	more := op.nextPaused(paused, `"More"'s request`)
	for !strings.Contains(more.Request.URL, "before=") {
		op.resume(more)
		more = op.nextPaused(paused, `"More"'s request`)
	}
	if err := e.m.orders.RecordFailedOrder(ctx, late); err != nil {
		t.Fatal(err)
	}
	for {
		ev := op.nextPaused(paused, "the table's refresh")
		op.resume(ev)
		if !strings.Contains(ev.Request.URL, "before=") {
			break
		}
	}
	op.resume(more)
	stop()
	op.waitFor("the flood's second page", rows+`.length === 200 && `+distinct+` === 200 && `+row(late.ReservationID)+` !== null`, 30*time.Second)
	// Only the resolved ones: none in the flood.
	_ = evalJS[bool](op, `(function(){ const s = document.getElementById("failed-state"); s.value = "resolved"; s.dispatchEvent(new Event("change")); return true })()`)
	op.waitFor("no resolved failed orders", rows+`.length === 0 && !document.getElementById("failed-empty").hidden && document.getElementById("failed-more").hidden`, 30*time.Second)
	op.noErrors()
}

// TestBrowserArchivedSale: an ended sale is shown draining while its
// Redis keys are there, and archived once they are gone, in the list and
// on its page, which offers nothing to change any more.
func TestBrowserArchivedSale(t *testing.T) {
	clk := &testClock{}
	e := startWebEngine(t, clk.hook(), func(m *Main) {
		m.Config.ArchiveAfter, m.Config.ArchiveInterval = time.Minute, 50*time.Millisecond
	})
	sale := e.newSale("Archived tea", "EUR", 4, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	if r := e.reserve(sale, e.token("only-buyer"), 1, ""); r.status != 202 {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	resID := ""
	servicetest.WaitFor(t, 30*time.Second, "the order", func() bool {
		ledger, err := e.m.orders.Ledger.SaleLedger(context.Background(), sale)
		if err == nil && len(ledger.Orders) == 1 {
			resID = ledger.Orders[0].ReservationID
		}
		return resID != ""
	})
	if r := e.do("POST", "/api/v1/reservations/"+resID+"/pay", e.token("only-buyer"), nil); r.status != 200 {
		t.Fatalf("pay: %d %v", r.status, r.body)
	}
	if r := e.admin("POST", "/admin/v1/sales/"+sale+"/end", nil); r.status != 200 {
		t.Fatalf("end: %d %v", r.status, r.body)
	}

	browser := startChromium(t)
	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops-carol")
	item := `document.querySelector(` + strconv.Quote(`#sale-list .sale-item[data-sale-id="`+sale+`"] .badge`) + `)`
	op.waitFor("the sale draining in the list", `(`+item+` || {textContent: ""}).textContent === "ended · draining"`, 30*time.Second)
	op.do(chromedp.Click(chromedp.CSS(`#sale-list .sale-item[data-sale-id="` + sale + `"]`)))
	op.waitFor("its page draining", `document.getElementById("sale-phase").textContent === "ended · draining" && document.getElementById("manage-note").textContent.includes("still settling")`, 30*time.Second)
	if !evalJS[bool](op, `document.getElementById("end-sale").hidden && document.getElementById("stock-form").hidden && document.getElementById("edit-form").hidden`) {
		t.Error("an ended sale still offers edit, add stock or end")
	}

	clk.advance(2 * time.Minute) // past ArchiveAfter
	servicetest.WaitFor(t, 30*time.Second, "the sale archived", func() bool {
		_, ok, err := e.m.stock.Archive().ArchivedSummary(context.Background(), sale)
		return err == nil && ok
	})
	if r := e.admin("GET", "/admin/v1/sales/"+sale, nil); r.body["phase"] != "archived" {
		t.Fatalf("the API's view after archiving: %v", r.body)
	}
	// The open page refreshes its view by itself; the list on Refresh.
	op.waitFor("its page archived", `document.getElementById("sale-phase").textContent === "ended · archived" && document.getElementById("manage-note").textContent.includes("archived")`, 30*time.Second)
	op.do(chromedp.Click(chromedp.ID("sales-refresh")))
	op.waitFor("the list archived", `(`+item+` || {textContent: ""}).textContent === "ended · archived"`, 30*time.Second)
	if got := op.text("sale-meta"); !strings.Contains(got, "3 of 4 left") {
		t.Errorf("archived sale's meta %q, want 3 of 4 left (the database's)", got)
	}
	// Ended early, its preheated row still said live: no heal may have
	// taken the archive for lost writes and rebuilt the sale.
	e.waitMetric("seckill_stock_store_heals_total 0")
	if _, err := e.m.stock.StockStore().Stock(context.Background(), sale); err == nil {
		t.Error("the archived sale's stock is back in Redis")
	}
	op.shot("18-control-room-sale-archived")
	op.noErrors()
}
