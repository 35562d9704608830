package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserTokenHandoff: a shop hands a signed-in buyer to the sale page
// with the token in the URL fragment (#token=…), which no request carries:
// the page signs the buyer in, takes the token out of the address bar and
// history, and buys with it; no resource the page loaded had the token in
// its URL. A token in the query string (?token=…, seen by every proxy and
// access log) is not used, and is taken out of the address bar too.
func TestBrowserTokenHandoff(t *testing.T) {
	requireChromium(t)
	e := startEngine(t, nil) // serve's defaults: no demo login
	sale := e.liveSale(5, 1)
	tok := e.token("carol")
	browser := startChromium(t)

	carol := openTab(t, browser, "carol")
	carol.do(desktopSized(), chromedp.Navigate(e.base+"/sales/"+sale+"#token="+tok+"&from=shop"))
	carol.waitFor("signed in from the fragment", `!document.getElementById("account").hidden && document.getElementById("who").textContent === "carol"`, 30*time.Second)
	if href := evalJS[string](carol, `location.href`); strings.Contains(href, tok) || !strings.HasSuffix(href, "/sales/"+sale+"#from=shop") {
		t.Errorf("address bar after the handoff: %q; want the token gone, the rest of the fragment kept", href)
	}
	carol.waitFor("the buy button", `!document.getElementById("buy").disabled`, 30*time.Second)
	carol.do(chromedp.Click(chromedp.ID("buy")))
	deadline := time.Now().Add(30 * time.Second)
	for e.stock(sale).Reserved != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the handed-over buyer's click reserved nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if leaked := evalJS[[]string](carol, `performance.getEntriesByType("resource").map(e => e.name).filter(n => n.includes(`+jsString(tok)+`))`); len(leaked) > 0 {
		t.Errorf("requests carried the token in their URL: %v", leaked)
	}
	carol.noErrors()

	dave := openTab(t, browser, "dave")
	dave.do(desktopSized(), chromedp.Navigate(e.base+"/sales/"+sale+"?token="+e.token("dave")))
	dave.waitFor("the sign-in form", `!document.getElementById("signin").hidden`, 30*time.Second)
	if signedIn := evalJS[bool](dave, `!document.getElementById("account").hidden`); signedIn {
		t.Error("a ?token= in the query string signed the buyer in")
	}
	if search := evalJS[string](dave, `location.search`); search != "" {
		t.Errorf("location.search %q after load; want the ?token= taken out", search)
	}
	dave.noErrors()
}

func jsString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
