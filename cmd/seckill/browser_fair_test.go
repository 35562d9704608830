package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// headlineIs is a condition on the buyer page's live region.
func headlineIs(prefix string) string {
	return `document.getElementById("adm-headline").textContent.startsWith(` + strconv.Quote(prefix) + `)`
}

// submitAndWait clicks a form's submit button, which loads a new page,
// and waits for cond on that page. A poll that was running in the page
// the browser left fails ("cannot find context"): it is polled again in
// the new one.
func (tb *browserTab) submitAndWait(button, what, cond string, timeout time.Duration) {
	tb.t.Helper()
	_ = evalJS[bool](tb, `(window.seckillLeft = true)`)
	tb.do(chromedp.Click(chromedp.ID(button)))
	deadline := time.Now().Add(timeout)
	// The new page's headline is parsed before the rest of it: wait for
	// the whole document, so that what the caller reads next is there.
	cond = `!window.seckillLeft && document.readyState === "complete" && (` + cond + `)`
	for {
		err := chromedp.Do(tb.ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(100*time.Millisecond)))
		if err == nil {
			return
		}
		msg := strings.ToLower(err.Error())
		if time.Now().Before(deadline) && (strings.Contains(msg, "context") || strings.Contains(msg, "navigat")) {
			continue
		}
		tb.waitFor(what, cond, time.Second) // fails with a screenshot and the page's text
		return
	}
}

// openInControlRoom opens a sale by its id in a signed-in control room.
func (tb *browserTab) openInControlRoom(id string) {
	tb.t.Helper()
	tb.do(chromedp.SetValue(chromedp.ID("open-id"), id), chromedp.Click(chromedp.CSS(`#open-form button[type=submit]`)))
	tb.waitFor("the sale open", `!document.getElementById("sale-view").hidden && !document.getElementById("adm-panel").hidden`, 30*time.Second)
}

// TestBrowserLottery: two buyers enter a lottery of one unit from its page
// (the page says they are in the draw, and when the results come); at
// close the draw runs and, with no reload, one page says the buyer won
// and shows the order to pay, the other says not drawn; the control room
// shows the entrants, the draw, its seed (the one the API publishes) and
// the waiting list.
func TestBrowserLottery(t *testing.T) {
	e := startWebEngine(t, func(m *Main) { m.Config.DrawInterval = 50 * time.Millisecond })
	browser := startChromium(t)
	// The buyers sign in on a lottery open for an hour, then go to the one
	// they enter, whose entries close moments after they are ready.
	warm, _ := e.createLottery(1, 1, 30*time.Minute)
	alice := openTab(t, browser, "alice")
	alice.do(phoneSized(), chromedp.Navigate(e.url+"/sales/"+warm))
	alice.signIn("alice")
	alice.waitFor("the entry form", headlineIs("Enter the draw.")+` && !document.getElementById("enter-form").hidden`, 30*time.Second)
	alice.shot("20-lottery-enter-phone")
	bob := openTab(t, browser, "bob")
	bob.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+warm))
	bob.signIn("bob")
	bob.waitFor("the entry form", headlineIs("Enter the draw."), 30*time.Second)
	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops")

	// Entries close 20 s after the sale is made: time for two pages to
	// load and post their entries on a loaded machine.
	sale, closeAt := e.createLottery(1, 1, 20*time.Second)
	for _, b := range []*browserTab{alice, bob} {
		b.do(chromedp.Navigate(e.url + "/sales/" + sale))
		b.waitFor("the entry form", headlineIs("Enter the draw.")+` && !document.getElementById("enter-form").hidden`, 30*time.Second)
		b.submitAndWait("enter", "the entry", headlineIs("You're in the draw, results at "), 30*time.Second)
		if !evalJS[bool](b, `document.getElementById("buy-box").hidden`) {
			t.Errorf("%s: a lottery page shows the buy button", b.name)
		}
	}
	if time.Now().After(closeAt) {
		t.Fatal("the entries closed before both buyers entered: the machine is too slow for this test's window")
	}
	alice.shot("21-lottery-entered-phone")
	op.openInControlRoom(sale)
	op.waitFor("two entrants", `document.getElementById("a-entrants").textContent === "2" && document.getElementById("a-seed").textContent === "secret until the draw"`, 30*time.Second)
	commitment := op.text("a-commitment")
	op.shot("22-control-room-lottery-open")

	// The draw: the pages learn their result from the buyer feed.
	outcome := `(document.getElementById("adm-headline").textContent.startsWith("You won, pay by") || document.getElementById("adm-headline").textContent === "Not drawn this time.")`
	alice.waitFor("alice's result", outcome, time.Until(closeAt)+60*time.Second)
	bob.waitFor("bob's result", outcome, 60*time.Second)
	winner, loser := alice, bob
	if strings.HasPrefix(bob.text("adm-headline"), "You won") {
		winner, loser = bob, alice
	}
	if !strings.HasPrefix(winner.text("adm-headline"), "You won") || loser.text("adm-headline") != "Not drawn this time." {
		t.Fatalf("results: %s %q, %s %q; want one winner and one not drawn", alice.name, alice.text("adm-headline"), bob.name, bob.text("adm-headline"))
	}
	winner.waitFor("the winner's order", `!document.getElementById("order").hidden && !document.getElementById("pay").hidden`, 30*time.Second)
	winner.shot("23-lottery-won")
	loser.shot("24-lottery-not-drawn")
	winner.do(chromedp.Click(chromedp.ID("pay")))
	winner.waitFor("paid", `document.getElementById("order-status").textContent === "Paid"`, 30*time.Second)

	d := e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil)
	seed, _ := d.body["seed"].(string)
	if d.status != http.StatusOK || seed == "" || d.body["commitment"] != commitment {
		t.Fatalf("the API's draw %d %v; the control room showed commitment %s", d.status, d.body, commitment)
	}
	op.waitFor("the draw in the control room", `document.getElementById("a-draw").textContent.startsWith("drawn at") && document.getElementById("a-seed").textContent === "`+seed+`" && document.getElementById("a-winners").textContent === "1" && document.getElementById("a-waiting").textContent === "1"`, 30*time.Second)
	winners, _ := d.body["winners"].([]any)
	if len(winners) != 1 || op.text("a-winner-ids") != winners[0] {
		t.Errorf("the control room lists winners %q; the API %v", op.text("a-winner-ids"), winners)
	}
	if op.text("a-next") == "nobody" {
		t.Error("the control room shows an empty waiting list with one entrant not drawn")
	}
	op.shot("25-control-room-lottery-drawn")
	for _, tb := range []*browserTab{alice, bob, op} {
		tb.noErrors()
	}
}

// TestBrowserQueue: two buyers join a queue sale's waiting room from its
// page before the start and see their places; at the start the first is
// told it is their turn and buys with the ticket the page holds; the
// other is told sold out. The control room shows the queue's length, the
// admitted, the rate and the tickets issued.
func TestBrowserQueue(t *testing.T) {
	e := startWebEngine(t)
	browser := startChromium(t)
	queueSale := func(start time.Time) string {
		t.Helper()
		id := servicetest.UniqueName("q")
		if r := e.admin("POST", "/admin/v1/sales", map[string]any{
			"id": id, "name": "Console", "price_cents": 49900, "stock": 1, "per_user_limit": 1,
			"start_at": start.Format(time.RFC3339Nano), "end_at": start.Add(time.Hour).Format(time.RFC3339Nano),
			"admission": map[string]any{"mode": "queue", "admit_per_second": 1},
		}); r.status != http.StatusCreated {
			t.Fatalf("create queue sale: %d %v", r.status, r.body)
		}
		return id
	}
	warm := queueSale(time.Now().Add(time.Hour))
	alice := openTab(t, browser, "alice")
	alice.do(phoneSized(), chromedp.Navigate(e.url+"/sales/"+warm))
	alice.signIn("alice")
	alice.waitFor("the queue not open yet", headlineIs("The queue opens at"), 30*time.Second)
	bob := openTab(t, browser, "bob")
	bob.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+warm))
	bob.signIn("bob")
	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops")

	// Both must join before the start, so that their places are drawn at
	// random: a loaded machine that takes longer than the window gets a
	// new sale with twice the window.
	var (
		start time.Time
		sale  string
	)
	for window := 20 * time.Second; ; window *= 2 {
		start = time.Now().Add(window)
		sale = queueSale(start)
		for _, b := range []*browserTab{alice, bob} {
			b.do(chromedp.Navigate(e.url + "/sales/" + sale))
			b.waitFor("the join form", headlineIs("Join the queue.")+` && !document.getElementById("join-form").hidden`, 30*time.Second)
			b.submitAndWait("join", "a place", headlineIs("Position "), 30*time.Second)
			if !evalJS[bool](b, `document.getElementById("buy-box").hidden`) {
				t.Errorf("%s: the buy button shows before the buyer's turn", b.name)
			}
		}
		if time.Now().Before(start) {
			break
		}
		if window >= 160*time.Second {
			t.Fatal("the sale started before both buyers joined, with a window of 160 s")
		}
		t.Logf("the sale started before both buyers joined in a window of %s; again with twice the window", window)
	}
	places := map[*browserTab]string{}
	// Places are drawn at random until the start: bob's join may put him
	// ahead of alice, whose page then says so.
	waitFor(t, 30*time.Second, "places 1 and 2", func() bool {
		places[alice], places[bob] = alice.text("adm-headline"), bob.text("adm-headline")
		return strings.HasPrefix(places[alice], "Position 1 ") != strings.HasPrefix(places[bob], "Position 1 ")
	})
	first, second := alice, bob
	if strings.HasPrefix(places[bob], "Position 1 ") {
		first, second = bob, alice
	}
	if !strings.HasPrefix(places[first], "Position 1 ") || !strings.HasPrefix(places[second], "Position 2 ") {
		t.Fatalf("places %q and %q; want 1 and 2", places[alice], places[bob])
	}
	if live := evalJS[string](second, `document.getElementById("adm-headline").getAttribute("aria-live")`); live != "polite" {
		t.Errorf("the position is in a region with aria-live=%q, want polite", live)
	}
	second.shot("26-queue-waiting")
	op.openInControlRoom(sale)
	op.waitFor("the queue's length", `document.getElementById("a-length").textContent === "2" && document.getElementById("a-rate").textContent === "1/s"`, 30*time.Second)
	op.shot("27-control-room-queue-waiting")

	first.waitFor("the first buyer's turn", headlineIs("It's your turn.")+` && !document.getElementById("buy").disabled`, time.Until(start)+30*time.Second)
	first.shot("28-queue-your-turn")
	first.do(chromedp.Click(chromedp.ID("buy")))
	first.waitFor("the order", `!document.getElementById("order").hidden && !document.getElementById("pay").hidden`, 30*time.Second)
	// A reload keeps the claim: the headline says it, and no Buy.
	first.do(chromedp.Reload())
	first.waitFor("the claim after a reload", headlineIs("Reserved — pay by")+
		` && !document.getElementById("order").hidden && document.getElementById("buy-box").hidden`, 30*time.Second)
	second.waitFor("sold out", headlineIs("Sold out."), 60*time.Second)
	second.shot("29-queue-sold-out")
	if lvl := e.stock(sale); lvl.Reserved != 1 {
		t.Errorf("reserved %d units of 1", lvl.Reserved)
	}
	op.waitFor("admissions in the control room", `document.getElementById("a-admitted").textContent === "2" && /^[1-9]/.test(document.getElementById("a-tickets").textContent)`, 30*time.Second)
	op.shot("30-control-room-queue-admitted")
	for _, tb := range []*browserTab{alice, bob, op} {
		tb.noErrors()
	}
}
