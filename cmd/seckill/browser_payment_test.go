package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// TestBrowserShopPayment: the buyer page of a production engine (no
// buyer pay) shows the order waiting for payment with its deadline and a
// Pay link to the shop's payment page, no local Pay button; when the
// shop's provider confirms the payment the page turns to Paid by itself.
// An order paid after the sweeper gave its unit back turns refund_due, and
// the control room lists it for an operator to refund.
func TestBrowserShopPayment(t *testing.T) {
	clk := &testClock{}
	eng := startEngine(t, func(c *Config) {
		c.DemoLogin = "on" // the page's sign-in; buyer pay stays off
		c.PaymentWebhookSecret, c.ServiceToken = testWebhookSecret, testServiceToken
		c.PaymentURLTemplate = "https://shop.example/pay?reservation={id}&total={amount_cents}"
		c.SweepInterval, c.RestoreRetryInterval = 100*time.Millisecond, 100*time.Millisecond
	}, clk.hook())
	e := &webEngine{engine: eng, url: eng.base}
	sale := e.liveSale(5, 1)
	browser := startChromium(t)

	alice := openTab(t, browser, "alice")
	alice.do(phoneSized(), chromedp.Navigate(e.url+"/sales/"+sale))
	alice.signIn("alice")
	alice.waitFor("the buy button", `!document.getElementById("buy").disabled`, 30*time.Second)
	alice.do(chromedp.Click(chromedp.ID("buy")))
	alice.waitFor("the pay link", `!document.getElementById("order").hidden && !document.getElementById("pay-link").hidden`, 60*time.Second)
	resID := evalJS[string](alice, `sessionStorage.getItem("seckill.claim.`+sale+`")`)
	if got := alice.text("order-status"); got != "Waiting for payment" {
		t.Errorf("order status %q, want Waiting for payment", got)
	}
	if alice.text("order-payby") == "" || evalJS[bool](alice, `document.getElementById("order-payby").hidden`) {
		t.Error("the order shows no payment deadline")
	}
	if !evalJS[bool](alice, `document.getElementById("pay").hidden`) {
		t.Error("a production buyer page shows the local Pay button")
	}
	href := evalJS[string](alice, `document.getElementById("pay-link").href`)
	if want := "https://shop.example/pay?reservation=" + resID + "&total=9900"; href != want {
		t.Errorf("pay link %q, want %q", href, want)
	}
	alice.shot("20-buyer-waiting-for-payment-phone")

	// The shop's provider confirms the payment: the page follows.
	body := paymentBody("evt_browser", seckill.PaymentSucceeded, resID, 9900, "EUR")
	if r := e.webhook(body, webhooksig.Sign([]byte(body), clk.now(), []byte(testWebhookSecret))); r.status != 200 {
		t.Fatalf("webhook: %d %v", r.status, r.body)
	}
	alice.waitFor("paid", `document.getElementById("order-status").textContent === "Paid" && document.getElementById("pay-link").hidden`, 30*time.Second)
	alice.shot("21-buyer-paid-by-the-shop-phone")
	alice.noErrors()

	// Bob's order is not paid in time: the sweeper cancels it and gives
	// its unit back; then his money arrives.
	tok := e.token("bob")
	r := e.reserve(sale, tok, 1, "")
	if r.status != 202 {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	late := r.body["reservation_id"].(string)
	e.awaitOrders(map[string]string{late: tok}, time.Minute)
	clk.advance(16 * time.Minute)
	e.waitRemaining(sale, 4)
	body = paymentBody("evt_late_browser", seckill.PaymentSucceeded, late, 9900, "EUR")
	if r := e.webhook(body, webhooksig.Sign([]byte(body), clk.now(), []byte(testWebhookSecret))); r.status != 200 || r.body["outcome"] != "refund_due" {
		t.Fatalf("late webhook: %d %v", r.status, r.body)
	}

	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops-dana")
	item := `document.querySelector('#payments-list .payment-item[data-order-id="` + seckill.OrderIDOf(late) + `"][data-outcome="refund_due"]')`
	op.waitFor("the refund_due order in the control room", item+` !== null`, 30*time.Second)
	if text := evalJS[string](op, item+`.textContent`); !containsAll(text, "Refund due", seckill.OrderIDOf(late), "evt_late_browser") {
		t.Errorf("the listed payment reads %q", text)
	}
	if n := evalJS[int](op, `document.querySelectorAll('#payments-list .payment-item').length`); n != 1 {
		t.Errorf("%d payments listed, want the one refund_due", n)
	}
	op.shot("22-control-room-refund-due")
	// Filtered to mismatches, it is not shown.
	op.do(chromedp.SetValue(chromedp.ID("payments-outcome"), "mismatch"))
	_ = evalJS[bool](op, `(function(){ document.getElementById("payments-outcome").dispatchEvent(new Event("change")); return true })()`)
	op.waitFor("no mismatches", `document.querySelectorAll('#payments-list .payment-item').length === 0 && !document.getElementById("payments-empty").hidden`, 30*time.Second)
	op.noErrors()
}
