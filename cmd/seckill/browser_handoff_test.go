package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
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

// TestBrowserHandoverBoundToTheTab: with --shop-signin-url, the buyer page
// sends a buyer to the shop's sign-in page with return_to and a state kept
// in the tab, and takes the #token= the shop sends back only with that
// state. A link somebody else made (here a genuine one: carol's token and
// the state her own tab sent) signs nobody in as carol: a buyer not signed
// in stays signed out and is told why; a buyer signed in stays who they
// were. Without the check, both would be carol, and would claim and pay
// for her order (a login CSRF).
func TestBrowserHandoverBoundToTheTab(t *testing.T) {
	requireChromium(t)
	var (
		e         *engine
		mu        sync.Mutex
		handovers = map[string]string{} // buyer → the shop's last redirect
	)
	// The shop: /login?as=NAME signs the tab's browser in at the shop (a
	// cookie of its own origin); /signin hands the signed-in buyer back.
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "who", Value: r.URL.Query().Get("as"), Path: "/"})
			fmt.Fprintln(w, "signed in at the shop")
		case "/signin":
			who, err := r.Cookie("who")
			back, state := r.URL.Query().Get("return_to"), r.URL.Query().Get("state")
			if err != nil || !strings.HasPrefix(back, e.base+"/") || state == "" {
				http.Error(w, "not signed in at the shop, or a bad handover", http.StatusBadRequest)
				return
			}
			loc := back + "#token=" + e.token(who.Value) + "&state=" + url.QueryEscape(state)
			mu.Lock()
			handovers[who.Value] = loc
			mu.Unlock()
			http.Redirect(w, r, loc, http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(shop.Close)
	e = startEngine(t, func(c *Config) { c.ShopSignInURL = shop.URL + "/signin" })
	sale := e.liveSale(5, 1)
	page := e.base + "/sales/" + sale
	browser := startChromium(t)

	signIn := func(tb *browserTab, who string) {
		t.Helper()
		tb.do(desktopSized(), chromedp.Navigate(shop.URL+"/login?as="+who), chromedp.Navigate(page))
		tb.waitFor("the shop's sign-in link", `!document.getElementById("signin").hidden && document.getElementById("shop-signin") !== null`, 30*time.Second)
		tb.do(chromedp.Click(chromedp.ID("shop-signin")))
		// The click leaves for the shop and comes back.
		tb.waitFor("signed in from the shop", `document.getElementById("account") !== null && !document.getElementById("account").hidden && document.getElementById("who").textContent === `+jsString(who), 30*time.Second)
		if href := evalJS[string](tb, `location.href`); href != page {
			t.Errorf("%s: address bar after the handover %q, want %q", who, href, page)
		}
	}
	refused := `!document.getElementById("problem").hidden && document.getElementById("problem").textContent.includes("not started from this page")`

	carol := openTab(t, browser, "carol")
	signIn(carol, "carol")
	carol.noErrors()
	mu.Lock()
	carolsLink := handovers["carol"]
	mu.Unlock()
	if !strings.Contains(carolsLink, "&state=") {
		t.Fatalf("the shop's redirect %q carries no state", carolsLink)
	}

	// A buyer not signed in opens carol's link.
	erin := openTab(t, browser, "erin")
	erin.do(desktopSized(), chromedp.Navigate(carolsLink))
	erin.waitFor("the refusal", refused, 30*time.Second)
	if evalJS[bool](erin, `!document.getElementById("account").hidden`) {
		t.Errorf("erin was signed in as %q by carol's link", evalJS[string](erin, `document.getElementById("who").textContent`))
	}
	if href := evalJS[string](erin, `location.href`); strings.Contains(href, "token") || strings.Contains(href, "state") {
		t.Errorf("erin's address bar %q still holds the link's token or state", href)
	}
	erin.noErrors()

	// A signed-in buyer opens it, with its state and without.
	dave := openTab(t, browser, "dave")
	signIn(dave, "dave")
	stateless := page + "#token=" + e.token("carol")
	for _, link := range []string{carolsLink, stateless} {
		dave.do(chromedp.Navigate("about:blank"), chromedp.Navigate(link))
		dave.waitFor("the refusal", refused, 30*time.Second)
		if who := evalJS[string](dave, `document.getElementById("who").textContent`); who != "dave" {
			t.Errorf("dave is signed in as %q after opening %q", who, link)
		}
	}
	dave.noErrors()
}
