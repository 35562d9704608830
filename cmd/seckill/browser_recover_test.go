package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestBrowserRecoveredClaimIsTheSignedInBuyers: a first-come page looks
// for the buyer's claim when they sign in (buyer.js recoverClaim). The
// answer for a buyer who signed out meanwhile is not the next buyer's:
// carol signs in and out before her claims come back, dave signs in, and
// the page shows dave's claim, never carol's.
func TestBrowserRecoveredClaimIsTheSignedInBuyers(t *testing.T) {
	e := startWebEngine(t)
	sale := e.liveSale(10, 1)
	ids := map[string]string{}
	for _, user := range []string{"carol", "dave"} {
		r := e.reserve(sale, e.token(user), 1, "")
		id, _ := r.body["reservation_id"].(string)
		if r.status != http.StatusAccepted || id == "" {
			t.Fatalf("%s's claim: %d %v", user, r.status, r.body)
		}
		ids[user] = id
	}
	servicetest.WaitFor(t, 30*time.Second, "both orders", func() bool {
		for user, id := range ids {
			if r := e.do("GET", "/api/v1/reservations/"+id, e.token(user), nil); r.body["status"] != "ordered" {
				return false
			}
		}
		return true
	})

	browser := startChromium(t)
	tab := openTab(t, browser, "shared")
	tab.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+sale))
	paused, stop := tab.pauseRequests("*/reservations/mine*")
	defer stop()
	tab.signIn("carol")
	carols := tab.nextPaused(paused, "carol's claims")
	tab.do(chromedp.Click(chromedp.ID("signout")))
	evalJS[bool](tab, `(document.getElementById("demo-name").value = "", true)`)
	tab.signIn("dave")
	daves := tab.nextPaused(paused, "dave's claims")
	// Carol's answer arrives first, while dave is signed in; dave's once
	// the page has read hers.
	tab.resume(carols)
	tab.waitFor("carol's answer", `performance.getEntriesByType("resource").some(function (e) {
		return e.name.indexOf("/reservations/mine") >= 0 && e.responseEnd > 0; })`, 30*time.Second)
	tab.resume(daves)
	claimKey := `sessionStorage.getItem("seckill.claim.` + sale + `")`
	tab.waitFor("a claim shown", `!!`+claimKey, 30*time.Second)
	if got := evalJS[string](tab, claimKey); got != ids["dave"] {
		t.Fatalf("dave's page took claim %s; want his own %s (carol's is %s)", got, ids["dave"], ids["carol"])
	}
	tab.waitFor("dave's order", `!document.getElementById("order").hidden && !document.getElementById("pay").hidden`, 30*time.Second)
	tab.noErrors()
}
