package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
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
		ids[user] = claimed(t, user, e.reserve(sale, e.token(user), 1, ""))
	}
	e.waitOrdered(t, ids)

	browser := startChromium(t)
	tab := openTab(t, browser, "shared")
	tab.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+sale))
	paused, stop := tab.pauseRequests("*/reservations/mine*")
	defer stop()
	tab.answerAcrossSignOut(t, paused, "claims", "/reservations/mine", sale, ids)
}

// TestBrowserPolledStandingIsTheSignedInBuyers: a lottery or queue page
// without EventSource follows the buyer's standing by polling (buyer.js
// pollStanding). A standing asked for before a sign-out is not the next
// buyer's: carol's answer, sent while she was signed in, arrives once dave
// has signed in, and the page shows dave's claim, never carol's.
func TestBrowserPolledStandingIsTheSignedInBuyers(t *testing.T) {
	e := startWebEngine(t)
	sale := e.createQueue(10, 10, time.Now().Add(2*time.Second))
	ids := map[string]string{}
	for _, user := range []string{"carol", "dave"} {
		if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token(user), nil); r.status != http.StatusOK {
			t.Fatalf("%s joins: %d %v", user, r.status, r.body)
		}
	}
	for _, user := range []string{"carol", "dave"} {
		var ticket string
		servicetest.WaitFor(t, 30*time.Second, user+"'s turn", func() bool {
			r := e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user), nil)
			ticket, _ = r.body["ticket"].(string)
			return r.body["admitted"] == true && ticket != ""
		})
		ids[user] = claimed(t, user, e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(user), map[string]any{"qty": 1}, "Admission-Ticket", ticket))
	}
	e.waitOrdered(t, ids)

	browser := startChromium(t)
	tab := openTab(t, browser, "shared")
	// Without EventSource the page polls the standing from the start.
	if _, err := chromedp.Call(tab.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.EventSource; window.EventSource = undefined;`}); err != nil {
		t.Fatal(err)
	}
	tab.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+sale))
	if evalJS[bool](tab, `typeof EventSource === "function"`) {
		t.Fatal("the page has EventSource: it would not poll")
	}
	paused, stop := tab.pauseResponses("*/sales/" + sale + "/standing*")
	defer stop()
	tab.answerAcrossSignOut(t, paused, "standing", "/standing", sale, ids)
}

// claimed is the reservation id of user's claim r, which must be a 202.
func claimed(t *testing.T, user string, r reply) string {
	t.Helper()
	id, _ := r.body["reservation_id"].(string)
	if r.status != http.StatusAccepted || id == "" {
		t.Fatalf("%s's claim: %d %v", user, r.status, r.body)
	}
	return id
}

// waitOrdered waits until every buyer's claim in ids (buyer → reservation
// id) has its order.
func (e *webEngine) waitOrdered(t *testing.T, ids map[string]string) {
	t.Helper()
	servicetest.WaitFor(t, 30*time.Second, "every order", func() bool {
		for user, id := range ids {
			if r := e.do("GET", "/api/v1/reservations/"+id, e.token(user), nil); r.body["status"] != "ordered" {
				return false
			}
		}
		return true
	})
}

// answerAcrossSignOut races an answer across a sign-out, with the tab's
// requests or responses that paused holds: carol signs in and her what is
// asked for and held, she signs out and dave signs in and his is held;
// carol's answer reaches the page first (path names its request), dave's
// once the page has read hers. The page must show dave's claim (ids:
// buyer → reservation id), never carol's, with his order to pay.
func (tb *browserTab) answerAcrossSignOut(t *testing.T, paused <-chan fetch.EventRequestPaused, what, path, sale string, ids map[string]string) {
	t.Helper()
	tb.signIn("carol")
	carols := tb.nextPaused(paused, "carol's "+what)
	tb.do(chromedp.Click(chromedp.ID("signout")))
	evalJS[bool](tb, `(document.getElementById("demo-name").value = "", true)`)
	tb.signIn("dave")
	daves := tb.nextPaused(paused, "dave's "+what)
	tb.resume(carols)
	tb.waitFor("carol's answer", `performance.getEntriesByType("resource").some(function (e) {
		return e.name.indexOf("`+path+`") >= 0 && e.responseEnd > 0; })`, 30*time.Second)
	tb.resume(daves)
	claimKey := `sessionStorage.getItem("seckill.claim.` + sale + `")`
	tb.waitFor("a claim shown", `!!`+claimKey, 30*time.Second)
	if got := evalJS[string](tb, claimKey); got != ids["dave"] {
		t.Fatalf("dave's page took claim %s; want his own %s (carol's is %s)", got, ids["dave"], ids["carol"])
	}
	tb.waitFor("dave's order", `!document.getElementById("order").hidden && !document.getElementById("pay").hidden`, 30*time.Second)
	tb.noErrors()
}
